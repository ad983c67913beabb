// TokenLogprobs and the JSON shapes of OpenAI's logprobs (token_logprobs.h).
#include "token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/utf8.h"

namespace jet::server {

namespace {

using nlohmann::json;

// JSON has no -inf (a probability that underflowed): such a token gets -9999.0, as vLLM sends.
double logprob_value(float logprob) { return std::isfinite(logprob) ? logprob : -9999.0; }

json byte_values(const std::string& bytes) {
  json values = json::array();
  for (const unsigned char b : bytes) values.push_back(b);
  return values;
}

}  // namespace

void TokenLogprobs::push(int32_t id, float logprob) {
  // As IncrementalDecoder does for the completion text: whole characters only, special tokens
  // skipped; here the token's own bytes are kept as well.
  TokenLogprob token;
  token.bytes = tokenizer_->token_bytes(id, /*skip_special_tokens=*/true);
  token.logprob = logprob;
  starts_.push_back(text_size_);
  carried_.push_back(pending_.size());
  pending_ += token.bytes;
  const size_t complete = pending_.size() - utf8::incomplete_tail_length(pending_);
  token.text = utf8::decode_lossy(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  text_size_ += token.text.size();
  tokens_.push_back(std::move(token));
}

void TokenLogprobs::finish(const std::string& completion_text) {
  const size_t end = completion_text.size();
  if (text_size_ <= end) {
    if (!tokens_.empty()) tokens_.back().text += completion_text.substr(text_size_);
  } else {
    size_t keep = 0;
    while (keep < tokens_.size() && starts_[keep] < end) ++keep;
    tokens_.resize(keep);
    starts_.resize(keep);
    carried_.resize(keep);
    if (keep > 0) {  // the token the cut falls in (or right after)
      TokenLogprob& last = tokens_.back();
      const size_t length = end - starts_.back();
      last.text.resize(std::min(last.text.size(), length));
      // Its text begins with the bytes that earlier tokens left pending (a split character's);
      // its own follow, and those past the cut go.
      last.bytes.resize(std::min(last.bytes.size(), length - std::min(length, carried_.back())));
    }
  }
  pending_.clear();
  text_size_ = end;
}

std::vector<TokenLogprob> token_logprobs(const GenerationOutput& output, const Tokenizer& tokenizer) {
  TokenLogprobs list(tokenizer);
  for (size_t i = 0; i < output.completion_ids.size(); ++i) {
    list.push(output.completion_ids[i], i < output.logprobs.size() ? output.logprobs[i] : 0.0f);
  }
  list.finish(output.completion_text);
  return list.tokens();
}

json chat_logprobs(std::span<const TokenLogprob> tokens) {
  json content = json::array();
  for (const TokenLogprob& t : tokens) {
    content.push_back({{"token", t.text},
                       {"logprob", logprob_value(t.logprob)},
                       {"bytes", byte_values(t.bytes)},
                       {"top_logprobs", json::array()}});
  }
  return {{"content", std::move(content)}};
}

json completion_logprobs(std::span<const TokenLogprob> tokens, size_t text_offset) {
  json texts = json::array(), values = json::array(), offsets = json::array();
  for (const TokenLogprob& t : tokens) {
    texts.push_back(t.text);
    values.push_back(logprob_value(t.logprob));
    offsets.push_back(text_offset);
    text_offset += count_characters(t.text);
  }
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(values)},
          {"top_logprobs", nullptr},
          {"text_offset", std::move(offsets)}};
}

size_t count_characters(std::string_view text) {
  // Every byte but UTF-8's continuation bytes (10xxxxxx) begins a character.
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

}  // namespace jet::server
