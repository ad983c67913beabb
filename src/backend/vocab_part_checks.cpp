// The vocabulary-part ops' argument checks (vocab_part_checks.h).
#include "backend/vocab_part_checks.h"

#include "backend/tensor_checks.h"
#include "core/error.h"
#include "sampling/vocab_parts.h"

namespace jet {

void check_sample_vocab_parts(const Tensor& logits, int vocab0, int vocab, int64_t first_row, const Tensor& parts,
                              int rank) {
  check_tensor(logits, "sample_vocab_parts", "logits", DType::F32, {-1, -1});
  const int64_t R = logits.dim(0), n = logits.dim(1);
  JET_CHECK(vocab0 >= 0 && n >= 1 && vocab0 + n <= vocab, "sample_vocab_parts: ids [", vocab0, ", ", vocab0 + n,
            ") are not a slice of the vocabulary of ", vocab);
  check_tensor(parts, "sample_vocab_parts", "parts", DType::F32, {-1, R, kVocabPartFloats});
  JET_CHECK(rank >= 0 && rank < parts.dim(0), "sample_vocab_parts: rank ", rank, " of ", parts.dim(0));
  JET_CHECK(first_row >= 0, "sample_vocab_parts: negative first logits row ", first_row);
}

void check_combine_vocab_parts(const Tensor& parts, int64_t first_row) {
  check_tensor(parts, "combine_vocab_parts", "parts", DType::F32, {-1, -1, kVocabPartFloats});
  const int64_t ranks = parts.dim(0);
  JET_CHECK(ranks >= 1 && ranks <= kMaxVocabParts, "combine_vocab_parts: ", ranks, " parts, outside [1, ",
            kMaxVocabParts, "]");
  JET_CHECK(first_row >= 0, "combine_vocab_parts: negative first logits row ", first_row);
}

void check_place_vocab_columns(const Tensor& logits, int vocab0, const Tensor& whole) {
  check_tensor(logits, "place_vocab_columns", "logits", DType::F32, {-1, -1});
  const int64_t R = logits.dim(0), n = logits.dim(1);
  check_tensor(whole, "place_vocab_columns", "whole", DType::F32, {R, -1});
  const int64_t V = whole.dim(1);
  JET_CHECK(vocab0 >= 0 && vocab0 + n <= V, "place_vocab_columns: columns [", vocab0, ", ", vocab0 + n,
            ") do not fit rows of ", V);
}

}  // namespace jet
