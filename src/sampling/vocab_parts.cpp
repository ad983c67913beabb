// sample_vocab_part (vocab_parts.h): one rank's part of a row, on the CPU.
#include "sampling/vocab_parts.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "sampling/kept_set.h"
#include "sampling/rng.h"
#include "sampling/row_stats.h"

namespace jet {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool uses_top_k(const SlotParams& p, int vocab) { return p.top_k > 0 && p.top_k < vocab; }

}  // namespace

bool needs_whole_rows(const SlotParams& params, int vocab) {
  if (params.temperature <= 0.0f) return false;
  return uses_top_k(params, vocab) ? params.top_k > kVocabPartCandidates : params.top_p < 1.0f;
}

VocabPart sample_vocab_part(float* logits, int n, int vocab0, int vocab, const SlotParams& params, const uint32_t* seen,
                            int32_t position, int32_t global_step) {
  JET_ASSERT(n >= 1 && vocab0 >= 0 && vocab0 + n <= vocab, "vocabulary slice [", vocab0, ", ", vocab0 + n, ") of ",
             vocab);
  VocabPart part{};
  if (params.mask_id >= vocab0 && params.mask_id < vocab0 + n) logits[params.mask_id - vocab0] = kNegInf;
  if (seen != nullptr && params.repetition_penalty != 1.0f) {
    apply_repetition_penalty(logits, n, vocab0, seen, params.repetition_penalty);
  }
  const int greedy = argmax_lowest_id(logits, n);
  part.greedy_id = static_cast<float>(vocab0 + greedy);
  part.greedy_logit = logits[greedy];
  if (!(logits[greedy] > kNegInf)) {  // a slice of the mask alone: nothing here can be sampled
    part.log_mass = kNegInf;
    return part;
  }
  const bool sampled = params.temperature > 0.0f;
  const SoftmaxStats stats = softmax_in_place(logits, n, sampled ? params.temperature : 1.0f);
  const float* probs = logits;
  const double log_mass = double{stats.max_scaled} + std::log(stats.sum);
  part.log_mass = static_cast<float>(log_mass);
  part.log_mass_low = static_cast<float>(log_mass - part.log_mass);
  part.entropy = static_cast<float>(stats.entropy);
  part.greedy_p = probs[greedy];
  part.top1_p = stats.p1;
  part.top2_p = stats.p2;
  if (!sampled) return part;
  if (uses_top_k(params, vocab)) {
    // The slice's top_k: the whole row's top_k lies among the slices' ones.
    const int count = std::min({params.top_k, n, kVocabPartCandidates});
    thread_local std::vector<int32_t> top;
    if (count < n) {
      select_kept_set(probs, n, count, 1.0f, top);
    } else {
      top.resize(n);
      std::iota(top.begin(), top.end(), 0);
      std::sort(top.begin(), top.end(), MoreProbable{probs});
    }
    part.candidates = static_cast<float>(count);
    for (int k = 0; k < count; ++k) {
      part.candidate_id[k] = static_cast<float>(vocab0 + top[k]);
      part.candidate_p[k] = probs[top[k]];
    }
    return part;
  }
  const uint64_t prefix =
      uniform_prefix(params.seed, static_cast<uint64_t>(position), static_cast<uint64_t>(global_step));
  double score = 0.0;
  const int32_t drawn = gumbel_max(probs, n, {}, stats.top_id, prefix, vocab0, &score);
  part.draw_id = static_cast<float>(vocab0 + drawn);
  part.draw_score = static_cast<float>(score);
  part.draw_score_low = static_cast<float>(score - part.draw_score);
  part.draw_p = probs[drawn];
  return part;
}

}  // namespace jet
