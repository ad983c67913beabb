// The OpenAI-compatible bodies of `jetengine serve`: a /v1/completions or /v1/chat/completions
// request as an engine request, an engine output as the response, the SSE chunks of a streamed
// one, and the error body. Pure functions of their arguments (no I/O), so they are tested alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jet/engine.h"

namespace jet::server {

enum class Endpoint { Completions, ChatCompletions };

struct ParsedRequest {
  // One prompt, or /v1/completions' several; chat: the messages rendered through the model's chat
  // template. Choice p * n + j is the j-th of prompt p.
  std::vector<Prompt> prompts;
  SamplingParams params;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk carries the token counts
  // "return_tokens" (a jetengine extension, stream only): every chunk's choice carries "tokens",
  // the tokens committed with its text (token_list), for visualizers such as GET /viz.
  bool return_tokens = false;
  // Each choice carries its tokens' log-probabilities (token_logprobs.h): chat's "logprobs": true,
  // /v1/completions' "logprobs": 0.
  bool logprobs = false;
  int n = 1;  // choices: n engine requests of the prompt (a given seed s gives choice i seed s + i)
  std::optional<std::string> model;  // the request's "model", when it names one
};

// Reads a request body. Fields: OpenAI's (prompt or messages, max_tokens / max_completion_tokens,
// temperature, top_p, seed, stream, stream_options.include_usage, n, stop: a string or a list,
// logprobs, top_logprobs: 0),
// jetengine's return_tokens (with stream only) and the engine's sampling fields under
// their SamplingParams names (top_k, repetition_penalty, ignore_eos, stop_token_ids,
// denoising_steps, sub_block_length, editing_threshold, max_post_steps, remasking_strategy,
// dynamic_threshold, dynamic_factor, eb_threshold,
// diversity_enforce_barrier, epsilon_greedy); other
// fields are ignored. Throws jet::Error naming the field for malformed JSON, a wrong type or
// something the engine does not do. Ranges are the
// engine's to check. `engine` renders chat messages; `defaults` fills what the body leaves out.
ParsedRequest parse_request(Endpoint endpoint, const std::string& body, const Engine& engine,
                            const SamplingParams& defaults);

// The response to a finished request (`id` e.g. "cmpl-7", `created` in Unix seconds): one choice
// per output, in index order, n per prompt; the usage counts each prompt once and every choice's
// tokens. With `logprobs` (the tokenizer that decodes the tokens), each choice has its "logprobs";
// without, null.
nlohmann::json completion_response(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                                   const std::vector<GenerationOutput>& choices, int n,
                                   const Tokenizer* logprobs = nullptr);

// One SSE chunk of a streamed response, for choice `index`: new completion text, or (finish_reason
// set, text empty) the choice's last one. Chat chunks carry the assistant role in a choice's first.
// `tokens` (a token_list), unless null, goes into the choice as "tokens" (return_tokens);
// `logprobs` (chat_logprobs or completion_logprobs of the text's tokens) as "logprobs".
nlohmann::json stream_chunk(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                            int index, const std::string& text, const std::string& finish_reason, bool first,
                            const nlohmann::json& tokens = nullptr, const nlohmann::json& logprobs = nullptr);

// Committed tokens as return_tokens sends them: [{"id", "text" (the token decoded alone, special
// tokens kept), "step" (the 1-based denoise step that unmasked it), "logprob"}].
nlohmann::json token_list(const std::vector<CommittedToken>& tokens, const Tokenizer& tokenizer);

// The chunk that ends a stream asked for stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                           const std::vector<GenerationOutput>& choices, int n);

// {"error": {"message", "type", "code"}}.
nlohmann::json error_body(const std::string& message, const std::string& type, int code);

// POST /tokenize: {"prompt": text or token ids} or {"messages": [...]} (through the chat
// template), with "add_special_tokens" (default: true for a prompt, false for messages, as vLLM)
// -> {"tokens": [...], "count": n}.
nlohmann::json tokenize_response(const std::string& body, const Engine& engine);
// POST /detokenize: {"tokens": [ids]} -> {"prompt": text}; ids outside the tokenizer are an error.
nlohmann::json detokenize_response(const std::string& body, const Engine& engine);

}  // namespace jet::server
