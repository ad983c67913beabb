// The argument checks that Backend::sample_vocab_parts, combine_vocab_parts and
// place_vocab_columns start with on every backend (backend.h), so both refuse the same calls with
// the same messages.
#pragma once

#include <cstdint>

#include "backend/tensor.h"

namespace jet {

// logits f32 [R, n] are the ids [vocab0, vocab0 + n) of a `vocab`-id row; parts f32
// [ranks, R, kVocabPartFloats] with rank in [0, ranks); first_row >= 0.
void check_sample_vocab_parts(const Tensor& logits, int vocab0, int vocab, int64_t first_row, const Tensor& parts,
                              int rank);

// parts f32 [ranks, R, kVocabPartFloats] with ranks in [1, kMaxVocabParts]; first_row >= 0.
void check_combine_vocab_parts(const Tensor& parts, int64_t first_row);

// logits f32 [R, n], whole f32 [R, V], and columns [vocab0, vocab0 + n) inside V.
void check_place_vocab_columns(const Tensor& logits, int vocab0, const Tensor& whole);

}  // namespace jet
