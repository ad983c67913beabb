// The shared pieces of sampling a logits row (row_stats.h).
#include "sampling/row_stats.h"

#include <bit>
#include <cmath>

#include "sampling/rng.h"

namespace jet {

void apply_repetition_penalty(float* logits, int n, int vocab0, const uint32_t* seen, float penalty) {
  const int first_word = vocab0 / 32, end_word = (vocab0 + n + 31) / 32;
  for (int w = first_word; w < end_word; ++w) {
    for (uint32_t bits = seen[w]; bits != 0; bits &= bits - 1) {
      const int i = w * 32 + std::countr_zero(bits) - vocab0;
      if (i < 0) continue;
      if (i >= n) break;
      float& l = logits[i];
      l = l > 0 ? l / penalty : l * penalty;  // the HF / vLLM rule
    }
  }
}

int argmax_lowest_id(const float* values, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (values[i] > values[best]) best = i;
  }
  return best;
}

// The entropy comes without a log per element: with z_i = l_i / T - max and Z = Σ e^z_i,
// H = -Σ p_i ln p_i = ln Z - Σ p_i z_i, a sum of two non-negative terms (no cancellation).
SoftmaxStats softmax_in_place(float* row, int n, float T) {
  SoftmaxStats stats;
  stats.max_scaled = row[argmax_lowest_id(row, n)] / T;  // division by T > 0 is monotone
  double sum = 0.0, weighted_z = 0.0;
  for (int i = 0; i < n; ++i) {
    const float z = row[i] / T - stats.max_scaled;
    const float e = std::exp(z);
    row[i] = e;
    sum += e;
    if (e > 0.0f) weighted_z += double{e} * z;  // skips -inf (masked) entries
  }
  stats.sum = sum;
  stats.entropy = std::log(sum) - weighted_z / sum;
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) {
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

// Starting from the most probable index (always in K), most need no logarithm: index i beats score
// b only if u_i > exp(-p_i e^-b) >= 1 - p_i e^-b, so an index whose u_i falls below 1 - p_i e^-b
// is skipped. The margin keeps the skip exact: a skipped score is below b by more than 1e-12, far
// above the rounding of the logs, so ties are always decided by the exact comparison.
int32_t gumbel_max(const float* probs, int n, const std::vector<int32_t>& kept, int32_t most_probable,
                   uint64_t rng_prefix, int vocab0, double* score) {
  constexpr double kSkipMargin = 1e-12;
  const auto draw = [&](int32_t i) { return uniform_lane(rng_prefix, static_cast<uint64_t>(vocab0 + i)); };
  auto score_of = [&](int32_t i) { return std::log(double{probs[i]}) - std::log(-std::log(draw(i))); };
  int32_t best = most_probable;
  double best_score = score_of(best);
  double win_scale = std::exp(-best_score);
  auto consider = [&](int32_t i) {
    const double p = probs[i];
    if (!(p > 0.0)) return;  // ln 0 = -inf never wins
    if (draw(i) < 1.0 - p * win_scale - kSkipMargin) return;
    const double s = score_of(i);
    if (s > best_score || (s == best_score && i < best)) {
      best = i;
      best_score = s;
      win_scale = std::exp(-s);
    }
  };
  if (kept.empty()) {
    for (int32_t i = 0; i < n; ++i) consider(i);
  } else {
    for (int32_t i : kept) consider(i);
  }
  if (score) *score = best_score;
  return best;
}

}  // namespace jet
