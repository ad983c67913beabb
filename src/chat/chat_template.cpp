// jet::ChatTemplate (include/jet/chat.h): reads a model's chat template and renders it with the
// variables transformers' apply_chat_template passes.
#include "chat/chat_template.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "chat/jinja_json.h"
#include "chat/jinja_template.h"

namespace jet {

struct ChatTemplate::Impl {
  jinja::Template compiled;
};

namespace {

std::string template_from_config(const nlohmann::ordered_json& config, const std::string& path) {
  const auto found = config.find("chat_template");
  JET_CHECK(found != config.end() && !found->is_null(), path,
            " has no \"chat_template\" (and no chat_template.jinja "
            "next to it)");
  if (found->is_string()) return found->get<std::string>();
  JET_CHECK(found->is_array(), path, ": \"chat_template\" must be a string or a list of {name, template}");
  for (const auto& entry : *found) {
    JET_CHECK(entry.is_object() && entry.contains("name") && entry.contains("template") && entry["name"].is_string() &&
                  entry["template"].is_string(),
              path, ": every \"chat_template\" list entry must be {\"name\": string, \"template\": string}");
    if (entry["name"] == "default") return entry["template"].get<std::string>();
  }
  throw Error(path + ": \"chat_template\" lists named templates but none is called \"default\"");
}

// The chat_template.jinja beside a tokenizer_config.json, which takes precedence over its key.
std::filesystem::path sidecar_template(const std::string& tokenizer_config_path) {
  return std::filesystem::path(tokenizer_config_path).parent_path() / "chat_template.jinja";
}

}  // namespace

std::string read_chat_template_source(const std::string& tokenizer_config_path) {
  const std::filesystem::path sidecar = sidecar_template(tokenizer_config_path);
  std::error_code ignored;
  if (std::filesystem::is_regular_file(sidecar, ignored)) return read_text_file(sidecar.string());
  const std::string text = read_text_file(tokenizer_config_path);
  nlohmann::ordered_json config;
  try {
    config = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(tokenizer_config_path + " is not valid JSON: " + e.what());
  }
  JET_CHECK(config.is_object(), tokenizer_config_path, " must hold a JSON object");
  return template_from_config(config, tokenizer_config_path);
}

bool has_chat_template_source(const std::string& tokenizer_config_path) {
  std::error_code ignored;
  if (std::filesystem::exists(sidecar_template(tokenizer_config_path), ignored)) return true;
  try {
    const nlohmann::ordered_json config = nlohmann::ordered_json::parse(read_text_file(tokenizer_config_path));
    return config.is_object() && config.contains("chat_template") && !config["chat_template"].is_null();
  } catch (const std::exception&) {
    return false;  // no readable config: no template source either
  }
}

jinja::Dict variables_from_json(const std::string& json_text, const std::string& what) {
  nlohmann::ordered_json json;
  try {
    json = nlohmann::ordered_json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + " is not valid JSON: " + e.what());
  }
  JET_CHECK(json.is_object(), what, " must be a JSON object, got ", json.type_name());
  return jinja::value_from_json(json).as_dict();
}

jinja::Dict chat_template_variables(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) {
  using jinja::Value;
  jinja::List message_values;
  for (const ChatMessage& message : messages) {
    jinja::Dict entry;
    entry.set("role", Value::string(message.role));
    entry.set("content", Value::string(message.content));
    if (message.reasoning_content) entry.set("reasoning_content", Value::string(*message.reasoning_content));
    message_values.push_back(Value::dict(std::move(entry)));
  }
  jinja::Dict variables;
  variables.set("messages", Value::list(std::move(message_values)));
  variables.set("tools", Value::none());
  variables.set("documents", Value::none());
  variables.set("add_generation_prompt", Value::boolean(options.add_generation_prompt));
  if (options.enable_thinking) variables.set("enable_thinking", Value::boolean(*options.enable_thinking));
  if (!options.bos_token.empty()) variables.set("bos_token", Value::string(options.bos_token));
  if (!options.eos_token.empty()) variables.set("eos_token", Value::string(options.eos_token));
  if (!options.extra_variables_json.empty()) {
    const jinja::Dict extra = variables_from_json(options.extra_variables_json, "extra chat template variables");
    for (const auto& [name, value] : extra.entries()) variables.set(name, value);
  }
  return variables;
}

ChatTemplate::ChatTemplate(std::string source) : impl_(std::make_unique<Impl>(Impl{jinja::Template(source)})) {}

ChatTemplate ChatTemplate::from_tokenizer_config(const std::string& path) {
  std::string source = read_chat_template_source(path);
  try {
    return ChatTemplate(std::move(source));
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) const {
  return impl_->compiled.render(chat_template_variables(messages, options));
}

std::string ChatTemplate::render_with_variables(const std::string& variables_json) const {
  return impl_->compiled.render(variables_from_json(variables_json, "chat template variables"));
}

}  // namespace jet
