// jet::Tokenizer: the encode pipeline (added tokens -> normaliser -> pre-tokenizer -> BPE ->
// post-processor) and decoding.
#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "core/utf8.h"

namespace jet {

using tokenizer::Segment;

void Tokenizer::Impl::add_token(const tokenizer::AddedToken& token, std::string_view where) {
  vocabulary.add(token.id, token.content, token.special, where);
  if (!added_token_ids.insert(token.id).second) return;  // already matched; only `special` changed
  if (token.normalized) {
    std::string scratch;
    normalized_added_tokens.add(token, std::string(normalizer.apply(token.content, scratch)));
  } else {
    raw_added_tokens.add(token, token.content);
  }
}

void Tokenizer::Impl::encode_into(std::string_view text, std::vector<int32_t>& ids) const {
  const auto encode_piece = [&](std::string_view piece) { model.encode_piece(piece, ids); };
  const auto encode_normalized = [&](const Segment& segment) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
    } else {
      pre_tokenizer.for_each_piece(segment.text, encode_piece);
    }
  };
  std::string normalized;
  raw_added_tokens.split(text, [&](const Segment& segment) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
    } else {
      normalized_added_tokens.split(normalizer.apply(segment.text, normalized), encode_normalized);
    }
  });
}

void Tokenizer::Impl::append_bytes(int32_t id, bool skip_special_tokens, std::string& bytes) const {
  if (!vocabulary.contains(id)) return;
  if (skip_special_tokens && vocabulary.is_special(id)) return;
  bytes += vocabulary.bytes(id);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const auto bad = utf8::first_invalid_offset(text)) {
    throw Error(str("cannot tokenize: invalid UTF-8 at byte offset ", *bad, " (byte 0x", std::hex,
                    static_cast<unsigned>(static_cast<unsigned char>(text[*bad])), ")"));
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  impl_->encode_into(text, ids);
  if (add_special_tokens) impl_->post_processor.apply(ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) impl_->append_bytes(id, skip_special_tokens, bytes);
  return utf8::decode_lossy(bytes);
}

std::string Tokenizer::token_bytes(int32_t id, bool skip_special_tokens) const {
  std::string bytes;
  impl_->append_bytes(id, skip_special_tokens, bytes);
  return bytes;
}

int32_t Tokenizer::token_to_id(std::string_view token) const { return impl_->vocabulary.find(token); }

std::string Tokenizer::id_to_token(int32_t id) const {
  return impl_->vocabulary.contains(id) ? impl_->vocabulary.text(id) : std::string();
}

size_t Tokenizer::size() const { return impl_->vocabulary.size(); }
size_t Tokenizer::model_vocab_size() const { return impl_->model.vocab_size(); }
bool Tokenizer::is_special(int32_t id) const { return impl_->vocabulary.is_special(id); }

void Tokenizer::add_token(const std::string& content, int32_t id, bool special) {
  tokenizer::AddedToken token;
  token.id = id;
  token.content = content;
  token.special = special;
  impl_->add_token(token, "add_token");
}

int32_t Tokenizer::eos_id() const { return impl_->eos_id; }
int32_t Tokenizer::bos_id() const { return impl_->bos_id; }
int32_t Tokenizer::pad_id() const { return impl_->pad_id; }

}  // namespace jet
