// Sampling a logits row split by vocabulary over tensor-parallel ranks (docs/tensor_parallel.md):
// each rank holds the logits of its slice of the vocabulary, reduces them to a VocabPart (its
// slice's log-mass, entropy, argmax, top two, Gumbel-max winner and top-k candidates), the ranks
// exchange the parts, and every rank combines them into the same PositionSample. Only what
// sampling needs travels, not the rows; top_p without a top_k the parts can carry needs the
// whole rows instead (needs_whole_rows). sample_vocab_part is the CPU's (the CUDA backend has its
// device twin, decode_sampler.cuh); combine_vocab_parts is both backends'.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "sampling/rng.h"
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
  float top1_p, top2_p;                      // the slice's two largest probabilities
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

// The most ranks whose parts combine_vocab_parts takes (the backends check it).
constexpr int kMaxVocabParts = 64;

// The sample of a row from its parts, parts[r * stride] the part of rank r (slices in vocabulary
// order, 1 <= num_parts <= kMaxVocabParts): what sample_position gives for the whole row, to
// rounding. Shared by the CPU backend and the CUDA kernels, so both combine alike. A part holds
// its slice's distribution normalised on its own; with share_r = exp(log_mass_r - ln Σ_r
// exp(log_mass_r)), id i of slice r has probability share_r * p_r(i), the entropy is
// Σ_r share_r (H_r - ln share_r), and since ln p + g differs from the slice's own ln p_r + g by
// ln share_r for every id of the slice, the whole row's Gumbel-max winner is the best of the
// slices' winners so shifted.
JET_HOST_DEVICE inline PositionSample combine_vocab_parts(const VocabPart* parts, int64_t stride, int num_parts,
                                                          const SlotParams& params, int vocab, int32_t position,
                                                          int32_t global_step) {
  const auto part = [&](int r) -> const VocabPart& { return parts[r * stride]; };
  float max_mass = -INFINITY;
  for (int r = 0; r < num_parts; ++r) max_mass = part(r).log_mass > max_mass ? part(r).log_mass : max_mass;
  PositionSample out;
  if (!(max_mass > -INFINITY)) {  // every id masked: as the whole row, nothing can be drawn
    out.token = static_cast<int32_t>(part(0).greedy_id);
    out.logprob = ::logf(1e-12f);
    return out;
  }
  const auto mass_of = [&](int r) { return static_cast<double>(part(r).log_mass) + part(r).log_mass_low; };
  double total = 0.0;
  for (int r = 0; r < num_parts; ++r) total += ::exp(mass_of(r) - max_mass);
  const double log_total = max_mass + ::log(total);
  double share[kMaxVocabParts];  // of the row's probability mass, per slice
  double entropy = 0.0;
  float p1 = 0.0f, p2 = 0.0f;
  for (int r = 0; r < num_parts; ++r) {
    share[r] = ::exp(mass_of(r) - log_total);
    if (!(share[r] > 0.0)) continue;
    entropy += share[r] * (static_cast<double>(part(r).entropy) - ::log(share[r]));
    const float tops[2] = {static_cast<float>(part(r).top1_p * share[r]),
                           static_cast<float>(part(r).top2_p * share[r])};
    for (const float p : tops) {
      if (p > p1) {
        p2 = p1;
        p1 = p;
      } else if (p > p2) {
        p2 = p;
      }
    }
  }
  out.entropy = static_cast<float>(entropy);
  out.margin = vocab > 1 ? p1 - p2 : 0.0f;

  if (params.temperature <= 0.0f) {
    int best = -1;  // the largest logit; a later slice wins only by a larger one (lowest id on ties)
    for (int r = 0; r < num_parts; ++r) {
      if (share[r] > 0.0 && (best < 0 || part(r).greedy_logit > part(best).greedy_logit)) best = r;
    }
    out.token = static_cast<int32_t>(part(best).greedy_id);
    out.confidence = static_cast<float>(part(best).greedy_p * share[best]);
  } else if (params.top_k > 0 && params.top_k < vocab) {
    // The row's top_k among the slices' candidates, most probable first (ties: the lower id; ids
    // are distinct, so the order is strict), each pass taking the best that orders after the last.
    struct Candidate {
      int32_t id;
      float p;
    };
    const auto before = [](const Candidate& a, const Candidate& b) { return a.p > b.p || (a.p == b.p && a.id < b.id); };
    Candidate kept[kVocabPartCandidates];
    int num_kept = 0;
    while (num_kept < params.top_k && num_kept < kVocabPartCandidates) {
      Candidate best{-1, 0.0f};
      for (int r = 0; r < num_parts; ++r) {
        for (int k = 0; k < static_cast<int>(part(r).candidates); ++k) {
          const Candidate c{static_cast<int32_t>(part(r).candidate_id[k]),
                            static_cast<float>(part(r).candidate_p[k] * share[r])};
          if ((num_kept == 0 || before(kept[num_kept - 1], c)) && (best.id < 0 || before(c, best))) best = c;
        }
      }
      if (best.id < 0) break;
      kept[num_kept++] = best;
    }
    if (params.top_p < 1.0f) {  // the shortest prefix whose mass, renormalised over the top_k, reaches top_p
      double mass = 0.0, cumulative = 0.0;
      for (int i = 0; i < num_kept; ++i) mass += kept[i].p;
      for (int i = 0; i < num_kept; ++i) {
        cumulative += kept[i].p;
        if (cumulative / mass >= params.top_p) {
          num_kept = i + 1;
          break;
        }
      }
    }
    const uint64_t prefix =
        uniform_prefix(params.seed, static_cast<uint64_t>(position), static_cast<uint64_t>(global_step));
    int best = 0;
    double best_score = -INFINITY;
    for (int i = 0; i < num_kept; ++i) {
      if (!(kept[i].p > 0.0f)) continue;
      const double score = ::log(static_cast<double>(kept[i].p)) -
                           ::log(-::log(uniform_lane(prefix, static_cast<uint64_t>(kept[i].id))));
      if (score > best_score || (score == best_score && kept[i].id < kept[best].id)) {
        best = i;
        best_score = score;
      }
    }
    out.token = kept[best].id;
    out.confidence = kept[best].p;
  } else {
    int best = -1;
    double best_score = 0.0;
    for (int r = 0; r < num_parts; ++r) {
      if (!(share[r] > 0.0)) continue;
      const double score = static_cast<double>(part(r).draw_score) + part(r).draw_score_low + ::log(share[r]);
      if (best < 0 || score > best_score) {
        best = r;
        best_score = score;
      }
    }
    out.token = static_cast<int32_t>(part(best).draw_id);
    out.confidence = static_cast<float>(part(best).draw_p * share[best]);
  }
  out.logprob = ::logf(out.confidence < 1e-12f ? 1e-12f : out.confidence);
  return out;
}

}  // namespace jet
