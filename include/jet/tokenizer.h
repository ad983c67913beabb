// The HuggingFace-compatible byte-level BPE tokenizer (Qwen3/SDAR, LLaMA-3 style tokenizer.json),
// and a streaming decoder for generated ids. Produces the same ids as HF `tokenizers`.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace jet {

class Tokenizer {
 public:
  // Loads a tokenizer.json. Throws jet::Error naming the file and the bad field.
  static Tokenizer from_file(const std::string& tokenizer_json);
  // Loads DIR/tokenizer.json and, if present, DIR/tokenizer_config.json: tokens of its
  // added_tokens_decoder missing from tokenizer.json are added (SDAR's <|MASK|>), and its
  // eos_token / bos_token / pad_token name the ids eos_id() / bos_id() / pad_id(). A folder
  // without tokenizer.json whose tokenizer_class is Qwen2's (or Dream's) is read from its
  // vocab.json and merges.txt instead, as transformers converts them.
  static Tokenizer from_dir(const std::string& dir);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text to ids. Added tokens (<|im_start|>, ...) in the text are recognised. With
  // add_special_tokens, the post-processor's tokens (e.g. BOS) are added. Throws jet::Error on
  // invalid UTF-8, naming the byte offset. Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;

  // Ids to text. Ids the tokenizer does not know (e.g. the model's padding rows) decode to
  // nothing; invalid UTF-8 in the bytes becomes U+FFFD per maximal invalid subsequence.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // One token's own bytes, not made valid UTF-8: part of a character a later token completes may
  // be all it holds (what OpenAI's logprobs call a token's "bytes"). "" for an unknown id, and for
  // a special token when skip_special_tokens.
  std::string token_bytes(int32_t id, bool skip_special_tokens = false) const;

  int32_t token_to_id(std::string_view token) const;  // -1 if absent
  std::string id_to_token(int32_t id) const;          // "" if absent
  size_t size() const;                                // largest known id + 1
  size_t model_vocab_size() const;                    // model.vocab's entries: transformers' vocab_size
  bool is_special(int32_t id) const;

  // Adds an added token (matched in raw text, not normalised, no stripping). Throws if the id
  // or the content already belongs to a different token. Not thread-safe with encode/decode.
  void add_token(const std::string& content, int32_t id, bool special);

  int32_t eos_id() const;  // -1 if none
  int32_t bos_id() const;  // -1 if none
  int32_t pad_id() const;  // -1 if none

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  friend struct TokenizerBuilder;  // src/tokenizer/tokenizer_loader.cpp
  std::unique_ptr<Impl> impl_;
  friend class IncrementalDecoder;
};

// Decodes a stream of ids piece by piece, for streaming generation. The concatenation of every
// push() and the final finish() equals tokenizer.decode(all ids).
class IncrementalDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // The text completed by `id`. An incomplete UTF-8 character at the end is held back until
  // the ids that complete it arrive, so no broken character is ever emitted.
  std::string push(int32_t id);

  // Flushes what is held back (an incomplete character becomes U+FFFD, as decode does).
  std::string finish();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // bytes not yet emitted
};

}  // namespace jet
