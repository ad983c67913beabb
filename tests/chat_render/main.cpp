// chat_template_render: renders chat templates for the Python differential tests. Reads JSON
// lines on stdin, each {"template": ..., "context": {...}} (the context is the whole set of
// template variables) or {"template": ..., "messages": [...], "options": {...}} (through
// ChatTemplate::render, the API the engine uses), and writes one JSON line per input:
// {"output": "..."} or {"error": "..."}.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "jet/chat.h"

namespace {

jet::ChatTemplateOptions options_from_json(const nlohmann::json& json) {
  jet::ChatTemplateOptions options;
  options.add_generation_prompt = json.value("add_generation_prompt", true);
  if (json.contains("enable_thinking")) options.enable_thinking = json["enable_thinking"].get<bool>();
  options.bos_token = json.value("bos_token", "");
  options.eos_token = json.value("eos_token", "");
  if (json.contains("extra_variables")) options.extra_variables_json = json["extra_variables"].dump();
  return options;
}

std::vector<jet::ChatMessage> messages_from_json(const nlohmann::json& json) {
  std::vector<jet::ChatMessage> messages;
  for (const auto& entry : json) {
    jet::ChatMessage message{entry.at("role").get<std::string>(), entry.at("content").get<std::string>()};
    // null is absent, as the engine's JSON readers take it; "" is present and empty.
    if (entry.contains("reasoning_content") && !entry["reasoning_content"].is_null()) {
      message.reasoning_content = entry["reasoning_content"].get<std::string>();
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

std::string render_request(const nlohmann::ordered_json& request) {
  const jet::ChatTemplate chat_template(request.at("template").get<std::string>());
  if (request.contains("context")) return chat_template.render_with_variables(request["context"].dump());
  return chat_template.render(messages_from_json(request.at("messages")),
                              options_from_json(request.value("options", nlohmann::json::object())));
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    nlohmann::ordered_json reply;
    try {
      reply["output"] = render_request(nlohmann::ordered_json::parse(line));
    } catch (const jet::Error& e) {
      reply["error"] = e.what();
    } catch (const nlohmann::json::exception& e) {
      reply["error"] = std::string("bad request line: ") + e.what();
    }
    std::cout << reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n' << std::flush;
  }
  return 0;
}
