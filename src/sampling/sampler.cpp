// sample_position (docs/decoding.md §3). The row is turned into probabilities in place; the
// kept set of top-k / top-p is found by selection, sorting only the prefix that top-p needs, and
// the Gumbel noise is drawn only for kept ids.
#include "sampling/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/error.h"
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
    } else if (p > stats.p2) {
      stats.p2 = p;
    }
  }
  return stats;
}

// Ids by probability descending, ties to the lower id: a strict total order.
struct MoreProbable {
  const float* probs;
  bool operator()(int32_t a, int32_t b) const { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); }
};

// The kept set K of top-k (k <= 0: off) then top-p (>= 1: off) in `kept`; empty means every id.
void select_kept_set(const float* probs, int V, int top_k, float top_p, std::vector<int32_t>& kept) {
  kept.clear();
  const bool use_k = top_k > 0 && top_k < V;
  const bool use_p = top_p < 1.0f;
  if (!use_k && !use_p) return;
  kept.resize(V);
  std::iota(kept.begin(), kept.end(), 0);
  const MoreProbable more{probs};
  int size = V;
  if (use_k) {
    std::nth_element(kept.begin(), kept.begin() + top_k, kept.end(), more);
    size = top_k;
    kept.resize(size);
  }
  if (!use_p) return;
  double mass = 0.0;  // of K, to renormalise the cumulative sums over K
  for (int32_t id : kept) mass += probs[id];
  // Sort K's most probable prefix in growing chunks until its renormalised sum reaches top_p:
  // the ids after a sorted prefix are all less probable, so each chunk extends the order.
  double cumulative = 0.0;
  for (int sorted = 0, chunk = 64; sorted < size; chunk *= 4) {
    const int end = std::min(size, sorted + chunk);
    std::nth_element(kept.begin() + sorted, kept.begin() + (end - 1), kept.begin() + size, more);
    std::sort(kept.begin() + sorted, kept.begin() + end, more);
    for (; sorted < end; ++sorted) {
      cumulative += probs[kept[sorted]];
      if (cumulative / mass >= top_p) {
        kept.resize(sorted + 1);
        return;
      }
    }
  }
  // Rounding kept the renormalised sum just below top_p: K stays whole.
}

// argmax over K of ln(p_i) + g_i, g_i = -ln(-ln(u_i)) in float64; lowest id on ties.
int32_t gumbel_max(const float* probs, int V, const std::vector<int32_t>& kept, uint64_t rng_prefix) {
  int32_t best = kept.empty() ? 0 : kept.front();
  double best_score = -std::numeric_limits<double>::infinity();
  auto consider = [&](int32_t id) {
    if (!(probs[id] > 0.0f)) return;  // ln 0 = -inf never wins
    const double u = uniform_lane(rng_prefix, static_cast<uint64_t>(id));
    const double score = std::log(double{probs[id]}) - std::log(-std::log(u));
    if (score > best_score || (score == best_score && id < best)) {
      best = id;
      best_score = score;
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

PositionSample sample_position(float* logits, int V, const SlotParams& params, const uint32_t* seen,
                               int32_t position, int32_t global_step) {
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
    const uint64_t prefix = uniform_prefix(params.seed, static_cast<uint64_t>(position),
                                           static_cast<uint64_t>(global_step));
    out.token = gumbel_max(probs, V, kept, prefix);
  }
  out.confidence = probs[out.token];
  out.logprob = std::log(std::max(out.confidence, 1e-12f));
  out.entropy = static_cast<float>(stats.entropy);
  out.margin = V > 1 ? stats.p1 - stats.p2 : 0.0f;
  return out;
}

}  // namespace jet
