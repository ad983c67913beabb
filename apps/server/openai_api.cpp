// Request parsing and response bodies of the OpenAI-compatible API (openai_api.h).
#include "openai_api.h"

#include <optional>
#include <vector>

#include "core/error.h"

namespace jet::server {

namespace {

using nlohmann::json;

// The field `key` of `body` when present and not null.
const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number_field(const json& body, const char* key, double fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  JET_CHECK(v->is_number(), "field '", key, "' must be a number, got ", v->dump());
  return v->get<double>();
}

int64_t integer_field(const json& body, const char* key, int64_t fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  JET_CHECK(v->is_number_integer(), "field '", key, "' must be an integer, got ", v->dump());
  return v->get<int64_t>();
}

bool bool_field(const json& body, const char* key, bool fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  JET_CHECK(v->is_boolean(), "field '", key, "' must be true or false, got ", v->dump());
  return v->get<bool>();
}

std::vector<int32_t> token_ids(const json& v, const char* key) {
  std::vector<int32_t> ids;
  for (const json& id : v) {
    JET_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() <= INT32_MAX, "field '", key,
              "' must hold token ids (non-negative integers), got ", id.dump());
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

SamplingParams read_sampling(const json& body, Endpoint endpoint, SamplingParams p) {
  p.max_tokens = static_cast<int>(integer_field(body, "max_tokens", p.max_tokens));
  if (endpoint == Endpoint::ChatCompletions) {
    p.max_tokens = static_cast<int>(integer_field(body, "max_completion_tokens", p.max_tokens));
  }
  p.temperature = number_field(body, "temperature", p.temperature);
  p.top_p = number_field(body, "top_p", p.top_p);
  p.top_k = static_cast<int>(integer_field(body, "top_k", p.top_k));
  p.repetition_penalty = number_field(body, "repetition_penalty", p.repetition_penalty);
  p.ignore_eos = bool_field(body, "ignore_eos", p.ignore_eos);
  p.denoising_steps = static_cast<int>(integer_field(body, "denoising_steps", p.denoising_steps));
  p.dynamic_threshold = number_field(body, "dynamic_threshold", p.dynamic_threshold);
  p.dynamic_factor = number_field(body, "dynamic_factor", p.dynamic_factor);
  p.eb_threshold = number_field(body, "eb_threshold", p.eb_threshold);
  if (const json* v = field(body, "remasking_strategy")) {
    JET_CHECK(v->is_string(), "field 'remasking_strategy' must be a string, got ", v->dump());
    p.remasking_strategy = v->get<std::string>();
  }
  if (const json* v = field(body, "seed")) {
    JET_CHECK(v->is_number_integer() && v->get<int64_t>() >= 0, "field 'seed' must be a non-negative integer, got ",
              v->dump());
    p.seed = v->get<uint64_t>();
  }
  if (const json* v = field(body, "stop_token_ids")) {
    JET_CHECK(v->is_array(), "field 'stop_token_ids' must be an array of token ids, got ", v->dump());
    p.stop_token_ids = token_ids(*v, "stop_token_ids");
  }
  JET_CHECK(integer_field(body, "n", 1) == 1, "field 'n': one choice per request is supported");
  if (const json* v = field(body, "stop")) {
    JET_CHECK((v->is_array() && v->empty()) || (v->is_string() && v->get<std::string>().empty()),
              "field 'stop': stop strings are not supported; give stop_token_ids instead");
  }
  return p;
}

Prompt read_prompt(const json& body) {
  const json* v = field(body, "prompt");
  JET_CHECK(v, "field 'prompt' is missing");
  if (v->is_string()) return v->get<std::string>();
  JET_CHECK(v->is_array(), "field 'prompt' must be a string or an array of token ids, got ", v->dump());
  if (v->size() == 1 && (*v)[0].is_string()) return (*v)[0].get<std::string>();
  JET_CHECK(v->empty() || !(*v)[0].is_string(), "field 'prompt': one prompt per request is supported");
  return token_ids(*v, "prompt");
}

// A message's content: a string, or the text parts of a list of parts.
std::string message_content(const json& message) {
  const json* content = field(message, "content");
  if (!content) return "";
  if (content->is_string()) return content->get<std::string>();
  JET_CHECK(content->is_array(), "a message's 'content' must be a string or a list of parts, got ", content->dump());
  std::string text;
  for (const json& part : *content) {
    JET_CHECK(part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string(),
              "a message's content parts must be {\"type\": \"text\", \"text\": ...}, got ", part.dump());
    text += part["text"].get<std::string>();
  }
  return text;
}

Prompt read_messages(const json& body, const Engine& engine) {
  const json* v = field(body, "messages");
  JET_CHECK(v && v->is_array() && !v->empty(), "field 'messages' must be a non-empty array of messages");
  std::vector<ChatMessage> messages;
  for (const json& m : *v) {
    JET_CHECK(m.is_object() && m.contains("role") && m["role"].is_string(),
              "every message needs a string 'role', got ", m.dump());
    messages.push_back(ChatMessage{m["role"].get<std::string>(), message_content(m), ""});
  }
  return engine.apply_chat_template(messages);
}

json usage(const GenerationOutput& out) {
  const int completion = static_cast<int>(out.completion_ids.size());
  return {{"prompt_tokens", out.prompt_len},
          {"completion_tokens", completion},
          {"total_tokens", out.prompt_len + completion}};
}

json finish(const std::string& finish_reason) { return finish_reason.empty() ? json(nullptr) : json(finish_reason); }

}  // namespace

ParsedRequest parse_request(Endpoint endpoint, const std::string& body, const Engine& engine,
                            const SamplingParams& defaults) {
  json request;
  try {
    request = json::parse(body);
  } catch (const json::exception& e) {
    throw Error(str("the request body is not valid JSON: ", e.what()));
  }
  JET_CHECK(request.is_object(), "the request body must be a JSON object");
  ParsedRequest parsed;
  parsed.params = read_sampling(request, endpoint, defaults);
  parsed.stream = bool_field(request, "stream", false);
  if (const json* options = field(request, "stream_options")) {
    JET_CHECK(options->is_object(), "field 'stream_options' must be an object, got ", options->dump());
    parsed.include_usage = bool_field(*options, "include_usage", false);
  }
  parsed.prompt = endpoint == Endpoint::Completions ? read_prompt(request) : read_messages(request, engine);
  return parsed;
}

json completion_response(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                         const GenerationOutput& out) {
  json choice = {{"index", 0}, {"finish_reason", out.finish_reason}};
  if (endpoint == Endpoint::Completions) {
    choice["text"] = out.completion_text;
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", out.completion_text}};
  }
  return {{"id", id},
          {"object", endpoint == Endpoint::Completions ? "text_completion" : "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})},
          {"usage", usage(out)}};
}

json stream_chunk(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                  const std::string& text, const std::string& finish_reason, bool first) {
  json choice = {{"index", 0}, {"finish_reason", finish(finish_reason)}};
  if (endpoint == Endpoint::Completions) {
    choice["text"] = text;
  } else {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty()) delta["content"] = text;
    choice["delta"] = delta;
  }
  return {{"id", id},
          {"object", endpoint == Endpoint::Completions ? "text_completion" : "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})}};
}

json usage_chunk(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                 const GenerationOutput& out) {
  return {{"id", id},
          {"object", endpoint == Endpoint::Completions ? "text_completion" : "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"choices", json::array()},
          {"usage", usage(out)}};
}

json error_body(const std::string& message, const std::string& type, int code) {
  return {{"error", {{"message", message}, {"type", type}, {"code", code}}}};
}

}  // namespace jet::server
