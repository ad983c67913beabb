// The inside of jet::Tokenizer: the HF pipeline stages and the vocabulary they share.
// Internal header (tests may include it); the public API is include/jet/tokenizer.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "jet/tokenizer.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocabulary.h"

namespace jet {

struct Tokenizer::Impl {
  // Registers an added token in the vocabulary and in the matcher for its kind; `where` names
  // its origin for error messages.
  void add_token(const tokenizer::AddedToken& token, std::string_view where);

  // Appends the ids of valid UTF-8 `text` (no post-processing).
  void encode_into(std::string_view text, std::vector<int32_t>& ids) const;

  // Appends the bytes `id` decodes to (nothing for unknown ids and skipped special tokens).
  void append_bytes(int32_t id, bool skip_special_tokens, std::string& bytes) const;

  tokenizer::Vocabulary vocabulary;
  tokenizer::Normalizer normalizer;
  tokenizer::PreTokenizer pre_tokenizer;
  tokenizer::BpeModel model;
  tokenizer::PostProcessor post_processor;
  tokenizer::AddedTokenMatcher raw_added_tokens;         // matched before normalisation
  tokenizer::AddedTokenMatcher normalized_added_tokens;  // matched in normalised text
  std::unordered_set<int32_t> added_token_ids;
  int32_t eos_id = -1;
  int32_t bos_id = -1;
  int32_t pad_id = -1;
};

}  // namespace jet
