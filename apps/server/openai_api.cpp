// Request parsing and response bodies of the OpenAI-compatible API (openai_api.h).
#include "openai_api.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/json_object.h"
#include "token_logprobs.h"

namespace jet::server {

namespace {

using nlohmann::json;

// OpenAI's own bounds on n and on a request's prompts: each choice is a sequence of the engine.
constexpr int64_t kMaxChoices = 128;
constexpr int64_t kMaxPrompts = 2048;

// The token ids under `key`: a list of integers in [0, INT32_MAX].
std::vector<int32_t> token_ids(const JsonObject& body, const std::string& key) {
  std::vector<int32_t> ids;
  for (const int64_t id : body.get_int_list(key, {})) {
    JET_CHECK(id >= 0 && id <= INT32_MAX, body.source(), ": key '", key,
              "' must hold token ids (non-negative integers), got ", id);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// OpenAI fields the engine does not implement: taken at a value that asks for nothing, refused by
// name otherwise (a silently ignored field would give the client what it did not ask for).
void refuse_unimplemented(const JsonObject& body) {
  static const std::vector<std::pair<const char*, std::vector<json>>> kNoOpValues = {
      {"logit_bias", {json::object()}},
      {"presence_penalty", {0}},
      {"frequency_penalty", {0}},
      {"min_tokens", {0}},
      {"echo", {false}},
      {"best_of", {1}},
      {"suffix", {""}},
  };
  for (const auto& [key, no_ops] : kNoOpValues) {
    if (!body.has(key)) continue;
    const json& value = body.json().at(key);
    JET_CHECK(std::find(no_ops.begin(), no_ops.end(), value) != no_ops.end(), body.source(), ": key '", key, "' (",
              json_excerpt(value), ") is not supported by this engine");
  }
}

// Whether the choices carry their tokens' logprobs. The engine has each committed token's own
// log-probability only, so a request for the most likely alternatives is refused.
bool read_logprobs(const JsonObject& body, Endpoint endpoint) {
  bool wanted = false;
  if (endpoint == Endpoint::ChatCompletions) {
    wanted = body.get_bool("logprobs", false);
  } else if (body.has("logprobs") && body.json().at("logprobs") != json(false)) {  // false, as null: none
    const int64_t alternatives = body.get_int("logprobs");
    JET_CHECK(alternatives >= 0, body.source(), ": key 'logprobs' must be a non-negative integer, got ", alternatives);
    JET_CHECK(alternatives == 0, body.source(), ": key 'logprobs' (", alternatives, ") asks for the ", alternatives,
              " most likely tokens at each position, which this engine does not compute; 0 gives the chosen ",
              "tokens' log-probabilities");
    wanted = true;
  }
  if (body.has("top_logprobs")) {
    const int64_t top = body.get_int("top_logprobs");
    JET_CHECK(top >= 0, body.source(), ": key 'top_logprobs' must be a non-negative integer, got ", top);
    JET_CHECK(top == 0, body.source(), ": key 'top_logprobs' (", top, ") asks for the ", top,
              " most likely tokens at each position, which this engine does not compute; only 0 is supported",
              endpoint == Endpoint::ChatCompletions && !wanted ? " (and it needs 'logprobs': true)" : "");
  }
  return wanted;
}

SamplingParams read_sampling(const JsonObject& body, Endpoint endpoint, SamplingParams p) {
  refuse_unimplemented(body);
  p.max_tokens = body.get_int32("max_tokens", p.max_tokens);
  if (endpoint == Endpoint::ChatCompletions) {
    p.max_tokens = body.get_int32("max_completion_tokens", p.max_tokens);
  }
  p.temperature = body.get_number("temperature", p.temperature);
  p.top_p = body.get_number("top_p", p.top_p);
  p.top_k = body.get_int32("top_k", p.top_k);
  p.repetition_penalty = body.get_number("repetition_penalty", p.repetition_penalty);
  p.ignore_eos = body.get_bool("ignore_eos", p.ignore_eos);
  p.denoising_steps = body.get_int32("denoising_steps", p.denoising_steps);
  p.sub_block_length = body.get_int32("sub_block_length", p.sub_block_length);
  if (body.has("editing_threshold")) p.editing_threshold = body.get_number("editing_threshold");
  p.max_post_steps = body.get_int32("max_post_steps", p.max_post_steps);
  p.dynamic_threshold = body.get_number("dynamic_threshold", p.dynamic_threshold);
  p.dynamic_factor = body.get_number("dynamic_factor", p.dynamic_factor);
  p.eb_threshold = body.get_number("eb_threshold", p.eb_threshold);
  p.diversity_enforce_barrier = body.get_int32("diversity_enforce_barrier", p.diversity_enforce_barrier);
  p.epsilon_greedy = body.get_number("epsilon_greedy", p.epsilon_greedy);
  p.remasking_strategy = body.get_string("remasking_strategy", p.remasking_strategy);
  if (body.has("seed")) {
    const int64_t seed = body.get_int("seed");
    JET_CHECK(seed >= 0, body.source(), ": key 'seed' must be a non-negative integer, got ", seed);
    p.seed = static_cast<uint64_t>(seed);
  }
  if (body.has("stop_token_ids")) p.stop_token_ids = token_ids(body, "stop_token_ids");
  if (body.has("stop")) {  // a string or a list of them; "" (as some clients send) is none
    const json& stop = body.json().at("stop");
    if (stop.is_string()) {
      if (!stop.get<std::string>().empty()) p.stop = {stop.get<std::string>()};
    } else {
      if (!stop.is_array()) body.wrong_type("stop", "a string or an array of strings");
      p.stop.clear();
      for (const json& s : stop) {
        if (!s.is_string()) body.wrong_type("stop", "a string or an array of strings");
        p.stop.push_back(s.get<std::string>());
      }
    }
  }
  return p;
}

Prompt read_prompt(const JsonObject& body) {
  JET_CHECK(body.has("prompt"), body.source(), ": key 'prompt' is missing");
  const json& v = body.json().at("prompt");
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) body.wrong_type("prompt", "a string or an array of token ids");
  if (v.size() == 1 && v[0].is_string()) return v[0].get<std::string>();
  JET_CHECK(v.empty() || !v[0].is_string(), body.source(), ": key 'prompt': one prompt per request is supported");
  return token_ids(body, "prompt");
}

// /v1/completions' prompts: a string, token ids, or a list of strings or of token-id lists.
std::vector<Prompt> read_prompts(const JsonObject& body) {
  JET_CHECK(body.has("prompt"), body.source(), ": key 'prompt' is missing");
  const json& v = body.json().at("prompt");
  if (!v.is_array() || v.empty() || !(v[0].is_string() || v[0].is_array())) return {read_prompt(body)};
  JET_CHECK(static_cast<int64_t>(v.size()) <= kMaxPrompts, body.source(), ": key 'prompt' holds ", v.size(),
            " prompts, more than ", kMaxPrompts);
  std::vector<Prompt> prompts;
  for (const json& one : v) {
    if (one.is_string()) {
      prompts.emplace_back(one.get<std::string>());
      continue;
    }
    JET_CHECK(one.is_array(), body.source(),
              ": key 'prompt': a list of prompts holds strings or lists of token ids, got ", json_excerpt(one));
    prompts.emplace_back(token_ids(JsonObject(json{{"prompt", one}}, body.source()), "prompt"));
  }
  return prompts;
}

// A message's content: a string, or the text parts of a list of parts.
std::string message_content(const JsonObject& message) {
  if (!message.has("content")) return "";
  const json& content = message.json().at("content");
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) message.wrong_type("content", "a string or a list of parts");
  std::string text;
  for (const json& part : content) {
    JET_CHECK(part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string(),
              message.source(), ": content parts must be {\"type\": \"text\", \"text\": ...}, got ",
              json_excerpt(part));
    text += part["text"].get<std::string>();
  }
  return text;
}

Prompt read_messages(const JsonObject& body, const Engine& engine) {
  JET_CHECK(body.has("messages"), body.source(), ": key 'messages' is missing");
  const json& list = body.json().at("messages");
  if (!list.is_array() || list.empty()) body.wrong_type("messages", "a non-empty array of messages");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonObject message(list[i], str(body.source(), "'s messages[", i, "]"));
    ChatMessage chat{message.get_string("role"), message_content(message)};
    // A string, even "", reaches the template; null counts as absent (JsonObject::has).
    if (message.has("reasoning_content")) chat.reasoning_content = message.get_string("reasoning_content");
    messages.push_back(std::move(chat));
  }
  return engine.apply_chat_template(messages);
}

json usage(const std::vector<GenerationOutput>& choices, int n) {
  int prompt = 0, completion = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i % n == 0) prompt += choices[i].prompt_len;  // a prompt's n choices share it
    completion += static_cast<int>(choices[i].completion_ids.size());
  }
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

json finish(const std::string& finish_reason) { return finish_reason.empty() ? json(nullptr) : json(finish_reason); }

}  // namespace

ParsedRequest parse_request(Endpoint endpoint, const std::string& body, const Engine& engine,
                            const SamplingParams& defaults) {
  const JsonObject request(parse_json(body, "the request body"), "the request body");
  ParsedRequest parsed;
  parsed.params = read_sampling(request, endpoint, defaults);
  parsed.stream = request.get_bool("stream", false);
  parsed.logprobs = read_logprobs(request, endpoint);
  const int64_t n = request.get_int("n", 1);
  JET_CHECK(n >= 1 && n <= kMaxChoices, request.source(), ": key 'n' must be in [1, ", kMaxChoices, "], got ", n);
  parsed.n = static_cast<int>(n);
  if (request.has("model")) parsed.model = request.get_string("model", "");
  if (request.has("stream_options")) {
    const json& value = request.json().at("stream_options");
    if (!value.is_object()) request.wrong_type("stream_options", "an object");
    const JsonObject options(value, "the request body's stream_options");
    parsed.include_usage = options.get_bool("include_usage", false);
  }
  parsed.return_tokens = request.get_bool("return_tokens", false);
  JET_CHECK(!parsed.return_tokens || parsed.stream, request.source(),
            ": key 'return_tokens' needs 'stream': true (the tokens ride in the stream's chunks)");
  if (endpoint == Endpoint::Completions) {
    parsed.prompts = read_prompts(request);
  } else {
    parsed.prompts = {read_messages(request, engine)};
  }
  JET_CHECK(static_cast<int64_t>(parsed.prompts.size()) * parsed.n <= kMaxPrompts, request.source(), ": ",
            parsed.prompts.size(), " prompts with n = ", parsed.n, " make more than ", kMaxPrompts, " choices");
  return parsed;
}

json completion_response(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                         const std::vector<GenerationOutput>& choices, int n, const Tokenizer* logprobs) {
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const GenerationOutput& out = choices[i];
    json choice = {{"index", i}, {"finish_reason", out.finish_reason}, {"logprobs", nullptr}};
    if (endpoint == Endpoint::Completions) {
      choice["text"] = out.completion_text;
    } else {
      choice["message"] = {{"role", "assistant"}, {"content", out.completion_text}};
    }
    if (logprobs) {
      const std::vector<TokenLogprob> tokens = token_logprobs(out, *logprobs);
      choice["logprobs"] = endpoint == Endpoint::Completions ? completion_logprobs(tokens, 0) : chat_logprobs(tokens);
    }
    list.push_back(std::move(choice));
  }
  return {{"id", id},
          {"object", endpoint == Endpoint::Completions ? "text_completion" : "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices", std::move(list)},
          {"usage", usage(choices, n)}};
}

json stream_chunk(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model, int index,
                  const std::string& text, const std::string& finish_reason, bool first, const json& tokens,
                  const json& logprobs) {
  json choice = {{"index", index}, {"finish_reason", finish(finish_reason)}, {"logprobs", logprobs}};
  if (!tokens.is_null()) choice["tokens"] = tokens;
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

json token_list(const std::vector<CommittedToken>& tokens, const Tokenizer& tokenizer) {
  json list = json::array();
  for (const CommittedToken& t : tokens) {
    list.push_back({{"id", t.id},
                    {"text", tokenizer.decode(std::vector<int32_t>{t.id})},
                    {"step", t.step},
                    {"logprob", t.logprob}});
  }
  return list;
}

json usage_chunk(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                 const std::vector<GenerationOutput>& choices, int n) {
  return {{"id", id},
          {"object", endpoint == Endpoint::Completions ? "text_completion" : "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"choices", json::array()},
          {"usage", usage(choices, n)}};
}

json error_body(const std::string& message, const std::string& type, int code) {
  return {{"error", {{"message", message}, {"type", type}, {"code", code}}}};
}

json tokenize_response(const std::string& body, const Engine& engine) {
  const JsonObject request(parse_json(body, "the request body"), "the request body");
  JET_CHECK(request.has("prompt") != request.has("messages"), request.source(),
            ": give one of 'prompt' and 'messages'");
  const bool chat = request.has("messages");
  const Prompt prompt = chat ? read_messages(request, engine) : read_prompt(request);
  std::vector<int32_t> ids;
  if (const auto* text = std::get_if<std::string>(&prompt)) {
    // As vLLM: a prompt gets the tokenizer's special tokens, rendered messages carry their own.
    ids = engine.tokenizer().encode(*text, request.get_bool("add_special_tokens", !chat));
  } else {
    ids = std::get<std::vector<int32_t>>(prompt);
  }
  return {{"tokens", ids}, {"count", ids.size()}};
}

json detokenize_response(const std::string& body, const Engine& engine) {
  const JsonObject request(parse_json(body, "the request body"), "the request body");
  JET_CHECK(request.has("tokens"), request.source(), ": key 'tokens' is missing");
  const std::vector<int32_t> ids = token_ids(request, "tokens");
  const size_t known = engine.tokenizer().size();
  for (const int32_t id : ids) {
    JET_CHECK(static_cast<size_t>(id) < known, request.source(), ": key 'tokens': id ", id,
              " is outside the tokenizer's ", known, " ids");
  }
  return {{"prompt", engine.tokenizer().decode(ids)}};
}

}  // namespace jet::server
