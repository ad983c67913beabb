// Streaming decode: bytes accumulate until they end on a character boundary. Holding back only
// a trailing incomplete sequence keeps the output identical to a one-shot decode, because such
// a tail starts with a lead byte, where the one-shot decoder starts a new sequence too.
#include "jet/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "core/utf8.h"

namespace jet {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDecoder::push(int32_t id) {
  tokenizer_->impl_->append_bytes(id, skip_special_tokens_, pending_);
  const size_t complete = pending_.size() - utf8::incomplete_tail_length(pending_);
  std::string text = utf8::decode_lossy(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return text;
}

std::string IncrementalDecoder::finish() {
  std::string text = utf8::decode_lossy(pending_);
  pending_.clear();
  return text;
}

}  // namespace jet
