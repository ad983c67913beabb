// The tokenizer.json "model" of type BPE over the byte-level alphabet: merges a piece's bytes
// by merge rank (lowest first, leftmost on ties), as HF does, with a bounded piece cache.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/merge_table.h"
#include "tokenizer/string_map.h"
#include "tokenizer/tokenizer_json_reader.h"
#include "tokenizer/vocabulary.h"

namespace jet::tokenizer {

class BpeModel {
 public:
  // Builds the model from tokenizer.json's "model" (`spec`, for its options) and its vocab and
  // merges (`tables`), registering the vocabulary in `vocabulary`.
  static BpeModel build(const nlohmann::json& spec, BpeTables&& tables, Vocabulary& vocabulary);

  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the ids of one pre-tokenized piece (raw bytes, not yet byte-level mapped).
  // Thread-safe.
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const;

  // Entries of model.vocab (no added tokens).
  size_t vocab_size() const { return vocab_size_; }

 private:
  BpeModel();
  void merge(std::string_view piece, std::vector<int32_t>& ids) const;

  std::array<int32_t, 256> byte_ids_;  // id of each byte's symbol, -1 if absent
  MergeTable merges_;
  // ignore_merges: a piece that is itself a vocabulary token maps to it directly (LLaMA-3).
  bool ignore_merges_ = false;
  size_t vocab_size_ = 0;
  StringMap<int32_t> whole_piece_ids_;  // raw bytes -> id, if ignore_merges

  struct PieceCache;
  std::unique_ptr<PieceCache> cache_;
};

}  // namespace jet::tokenizer
