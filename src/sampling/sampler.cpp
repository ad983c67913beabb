// sample_position (docs/decoding.md §3). The row is turned into probabilities in place; the
// Gumbel noise is drawn only for kept ids, and its logarithms only for ids that can still win.
#include "sampling/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "sampling/kept_set.h"
#include "sampling/rng.h"

namespace jet {

namespace {

void apply_repetition_penalty(float* logits, int V, const uint32_t* seen, float penalty) {
  const int words = (V + 31) / 32;
  for (int w = 0; w < words; ++w) {
    for (uint32_t bits = seen[w]; bits != 0; bits &= bits - 1) {
      const int id = w * 32 + std::countr_zero(bits);
      if (id >= V) break;
      float& l = logits[id];
      l = l > 0 ? l / penalty : l * penalty;  // the HF / vLLM rule
    }
  }
}

int argmax_lowest_id(const float* values, int V) {
  int best = 0;
  for (int i = 1; i < V; ++i) {
    if (values[i] > values[best]) best = i;
  }
  return best;
}

struct SoftmaxStats {
  double entropy = 0.0;
  float p1 = 0.0f, p2 = 0.0f;  // the two largest probabilities
  int32_t top_id = 0;          // the lowest id of probability p1
};

// row <- softmax(row / T) with the row maximum subtracted. The entropy comes without a log per
// element: with z_i = l_i / T - max and Z = Σ e^z_i, H = -Σ p_i ln p_i = ln Z - Σ p_i z_i, a sum
// of two non-negative terms (no cancellation).
SoftmaxStats softmax_in_place(float* row, int V, float T) {
  const float max_scaled = row[argmax_lowest_id(row, V)] / T;  // division by T > 0 is monotone
  double sum = 0.0, weighted_z = 0.0;
  for (int i = 0; i < V; ++i) {
    const float z = row[i] / T - max_scaled;
    const float e = std::exp(z);
    row[i] = e;
    sum += e;
    if (e > 0.0f) weighted_z += double{e} * z;  // skips -inf (masked) entries
  }
  SoftmaxStats stats;
  stats.entropy = std::log(sum) - weighted_z / sum;
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int i = 0; i < V; ++i) {
    const float p = row[i] * inv_sum;
    row[i] = p;
    if (p > stats.p1) {
      stats.p2 = stats.p1;
      stats.p1 = p;
      stats.top_id = i;
    } else if (p > stats.p2) {
      stats.p2 = p;
    }
  }
  return stats;
}

// argmax over K of ln(p_i) + g_i with g_i = -ln(-ln(u_i)), in float64, lowest id on ties.
// Starting from the most probable id (always in K), most ids need no logarithm: id i beats score b only if
// u_i > exp(-p_i e^-b) >= 1 - p_i e^-b, so an id whose u_i falls below 1 - p_i e^-b is skipped.
// The margin keeps the skip exact: a skipped score is below b by more than 1e-12, far above the
// rounding of the logs, so ties are always decided by the exact comparison.
int32_t gumbel_max(const float* probs, int V, const std::vector<int32_t>& kept, int32_t most_probable,
                   uint64_t rng_prefix) {
  constexpr double kSkipMargin = 1e-12;
  auto score_of = [&](int32_t id) {
    return std::log(double{probs[id]}) - std::log(-std::log(uniform_lane(rng_prefix, static_cast<uint64_t>(id))));
  };
  int32_t best = most_probable;
  double best_score = score_of(best);
  double win_scale = std::exp(-best_score);
  auto consider = [&](int32_t id) {
    const double p = probs[id];
    if (!(p > 0.0)) return;  // ln 0 = -inf never wins
    if (uniform_lane(rng_prefix, static_cast<uint64_t>(id)) < 1.0 - p * win_scale - kSkipMargin) return;
    const double score = score_of(id);
    if (score > best_score || (score == best_score && id < best)) {
      best = id;
      best_score = score;
      win_scale = std::exp(-score);
    }
  };
  if (kept.empty()) {
    for (int32_t id = 0; id < V; ++id) consider(id);
  } else {
    for (int32_t id : kept) consider(id);
  }
  return best;
}

}  // namespace

PositionSample sample_position(float* logits, int V, const SlotParams& params, const uint32_t* seen, int32_t position,
                               int32_t global_step) {
  JET_ASSERT(V >= 1, "vocabulary ", V);
  if (params.mask_id >= 0 && params.mask_id < V) logits[params.mask_id] = -std::numeric_limits<float>::infinity();
  if (seen != nullptr && params.repetition_penalty != 1.0f) {
    apply_repetition_penalty(logits, V, seen, params.repetition_penalty);
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
