// The log-probabilities of a choice's completion tokens as OpenAI's `logprobs` shows them: each
// token with its piece of the completion text (TokenLogprobs), and the two JSON shapes, chat's
// {"content": [...]} and /v1/completions' legacy {"tokens", "token_logprobs", ...}. The engine
// computes no alternatives, so top_logprobs are always empty.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "jet/engine.h"

namespace jet::server {

// One completion token.
struct TokenLogprob {
  // What the token adds to the completion text, so that the texts add up to it: a special token
  // adds "" (the text skips them), a character split over several tokens comes with its last
  // one, and the token a stop string begins in keeps what precedes the stop string.
  std::string text;
  std::string bytes;  // the token's own bytes (a split character's part), cut like text
  float logprob = 0.0f;
};

// A choice's tokens as they are committed, decoded as the engine decodes its completion text.
class TokenLogprobs {
 public:
  explicit TokenLogprobs(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  void push(int32_t id, float logprob);
  // Ends the list at the choice's completion text: where a stop string cut it, the tokens from
  // the cut on are dropped and the one it falls in is cut; otherwise the tail the decoder held
  // back (an unfinished character, shown as U+FFFD) joins the last token.
  void finish(const std::string& completion_text);

  const std::vector<TokenLogprob>& tokens() const { return tokens_; }

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;  // bytes of a character not finished yet
  std::vector<TokenLogprob> tokens_;
  std::vector<size_t> starts_;   // by token: where its text begins in the completion text
  std::vector<size_t> carried_;  // by token: pending bytes of earlier tokens its text begins with
  size_t text_size_ = 0;         // bytes of text so far
};

// A finished choice's tokens (its completion_ids and logprobs) against its completion_text.
std::vector<TokenLogprob> token_logprobs(const GenerationOutput& output, const Tokenizer& tokenizer);

// Chat's shape: {"content": [{"token", "logprob", "bytes", "top_logprobs": []}, ...]}.
nlohmann::json chat_logprobs(std::span<const TokenLogprob> tokens);
// /v1/completions' shape: {"tokens", "token_logprobs", "top_logprobs": null, "text_offset"}, the
// offsets in characters (code points) of the completion text; `text_offset` is that of tokens[0].
nlohmann::json completion_logprobs(std::span<const TokenLogprob> tokens, size_t text_offset);

// Characters (code points) of valid UTF-8 text.
size_t count_characters(std::string_view text);

}  // namespace jet::server
