// sample_position (docs/decoding.md §3). The row is turned into probabilities in place; the
// Gumbel noise is drawn only for kept ids (row_stats.h).
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "sampling/kept_set.h"
#include "sampling/rng.h"
#include "sampling/row_stats.h"

namespace jet {

PositionSample sample_position(float* logits, int V, const SlotParams& params, const uint32_t* seen, int32_t position,
                               int32_t global_step) {
  JET_ASSERT(V >= 1, "vocabulary ", V);
  if (params.mask_id >= 0 && params.mask_id < V) logits[params.mask_id] = -std::numeric_limits<float>::infinity();
  if (seen != nullptr && params.repetition_penalty != 1.0f) {
    apply_repetition_penalty(logits, V, 0, seen, params.repetition_penalty);
  }
  const bool greedy = params.temperature <= 0.0f;
  // Greedy takes the argmax of the logits themselves: probabilities can tie where logits do not.
  const int32_t greedy_token = greedy ? argmax_lowest_id(logits, V) : 0;
  const SoftmaxStats stats = softmax_in_place(logits, V, greedy ? 1.0f : params.temperature);
  const float* probs = logits;

  PositionSample out;
  if (greedy) {
    out.token = greedy_token;
  } else {
    thread_local std::vector<int32_t> kept;
    select_kept_set(probs, V, params.top_k, params.top_p, kept);
    const uint64_t prefix =
        uniform_prefix(params.seed, static_cast<uint64_t>(position), static_cast<uint64_t>(global_step));
    out.token = gumbel_max(probs, V, kept, stats.top_id, prefix);
  }
  out.confidence = probs[out.token];
  out.logprob = std::log(std::max(out.confidence, 1e-12f));
  out.entropy = static_cast<float>(stats.entropy);
  out.margin = V > 1 ? stats.p1 - stats.p2 : 0.0f;
  return out;
}

}  // namespace jet
