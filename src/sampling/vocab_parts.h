// Sampling a logits row split by vocabulary over tensor-parallel ranks (docs/tensor_parallel.md):
// each rank holds the logits of its slice of the vocabulary, reduces them to a VocabPart (its
// slice's log-mass, entropy, argmax, top two, Gumbel-max winner and top-k candidates), the ranks
// exchange the parts, and every rank combines them into the same PositionSample. Only what
// sampling needs travels, not the rows; top_p without a top_k the parts can carry needs the
// whole rows instead (needs_whole_rows).
#pragma once

#include <cstdint>

#include "sampling/sampling_types.h"

namespace jet {

// The most top-k candidates a part carries.
constexpr int kVocabPartCandidates = 64;

// One rank's statistics of one logits row over its slice of the vocabulary. All floats (ids are
// exact below 2^24; the two logarithms that are compared across slices carry a double's digits
// as a high and a low float), so that the ranks' parts, each written into its own place of a zeroed
// buffer, are exchanged by one fp32 all-reduce.
struct VocabPart {
  float log_mass, log_mass_low;              // ln Σ exp(logit / T) over the slice as the sum of two floats
                                             // (-inf: nothing to sample)
  float entropy;                             // of the slice's own distribution
  float greedy_id, greedy_logit, greedy_p;   // the logits' argmax (lowest id), its logit and probability
  float top1_id, top1_p, top2_p;             // the slice's two largest probabilities
  float draw_id, draw_p;                     // the Gumbel-max winner over the whole slice and its p
  float draw_score, draw_score_low;          // its ln p + g as the sum of two floats (a double's digits)
  float candidates;                          // top-k candidates below (top_k in [1, kVocabPartCandidates])
  float candidate_id[kVocabPartCandidates];  // most probable first, ties to the lower id
  float candidate_p[kVocabPartCandidates];
};
constexpr int kVocabPartFloats = static_cast<int>(sizeof(VocabPart) / sizeof(float));
static_assert(sizeof(VocabPart) == kVocabPartFloats * sizeof(float), "a VocabPart is floats only");

// Whether a slot's draws need whole logits rows: top_p below 1 without a top_k of at most
// kVocabPartCandidates, or such a top_k alone is more than the parts carry.
bool needs_whole_rows(const SlotParams& params, int vocab);

// The part of a row whose ids [vocab0, vocab0 + n) of a `vocab`-id row have the logits[0, n)
// (overwritten). seen, position and global_step as for sample_position (the bitmap of the whole
// vocabulary).
VocabPart sample_vocab_part(float* logits, int n, int vocab0, int vocab, const SlotParams& params, const uint32_t* seen,
                            int32_t position, int32_t global_step);

// The sample of a row from its parts, parts[r * stride] the part of rank r (slices in vocabulary
// order): what sample_position gives for the whole row, to rounding.
PositionSample combine_vocab_parts(const VocabPart* parts, int64_t stride, int num_parts, const SlotParams& params,
                                   int vocab, int32_t position, int32_t global_step);

}  // namespace jet
