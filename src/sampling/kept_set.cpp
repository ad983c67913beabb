// Top-k / top-p kept set. Top-k: one scan with a bounded heap (most ids are rejected by a single
// comparison with the heap's least probable entry). Top-p alone: a histogram of probability mass
// per float exponent finds the exponent the cut must lie above, and only ids from there up are
// sorted, so neither path sorts the whole vocabulary.
#include "sampling/kept_set.h"

#include <algorithm>
#include <array>
#include <bit>
#include <numeric>

namespace jet {

namespace {

constexpr double kOctaveSlack = 1e-6;

// The `count` most probable ids, most probable first.
void select_top(const float* probs, int V, int count, std::vector<int32_t>& top) {
  const MoreProbable more{probs};
  top.clear();
  if (count >= V / 4) {  // a large share of the vocabulary: plain sorting is cheaper
    top.resize(V);
    std::iota(top.begin(), top.end(), 0);
    std::partial_sort(top.begin(), top.begin() + count, top.end(), more);
    top.resize(count);
    return;
  }
  // Min-heap under `more`: front() is the least probable id kept so far.
  for (int32_t id = 0; id < V; ++id) {
    if (static_cast<int>(top.size()) < count) {
      top.push_back(id);
      std::push_heap(top.begin(), top.end(), more);
    } else if (more(id, top.front())) {
      std::pop_heap(top.begin(), top.end(), more);
      top.back() = id;
      std::push_heap(top.begin(), top.end(), more);
    }
  }
  std::sort_heap(top.begin(), top.end(), more);
}

// Length of the shortest prefix of `sorted` whose probability sum divided by `mass` reaches
// top_p, or 0 when rounding keeps every prefix just below it.
size_t top_p_prefix(const float* probs, const std::vector<int32_t>& sorted, double mass, float top_p) {
  double cumulative = 0.0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    cumulative += probs[sorted[i]];
    if (cumulative / mass >= top_p) return i + 1;
  }
  return 0;
}

}  // namespace

void select_kept_set(const float* probs, int V, int top_k, float top_p, std::vector<int32_t>& kept) {
  kept.clear();
  const bool use_k = top_k > 0 && top_k < V;
  const bool use_p = top_p < 1.0f;
  if (use_k) select_top(probs, V, top_k, kept);
  if (!use_p) return;

  double mass = 0.0;  // of K, to renormalise the cumulative sums over K
  if (use_k) {
    for (int32_t id : kept) mass += probs[id];
    if (const size_t n = top_p_prefix(probs, kept, mass, top_p)) kept.resize(n);
    return;
  }
  // Mass per float exponent (probabilities are >= 0, so the exponent orders them by octave; the
  // mask drops the sign bit a NaN may carry).
  std::array<double, 256> octave_mass{};
  auto octave = [&](int32_t id) { return (std::bit_cast<uint32_t>(probs[id]) >> 23) & 0xFFu; };
  for (int32_t id = 0; id < V; ++id) octave_mass[octave(id)] += probs[id];
  for (double m : octave_mass) mass += m;
  // The highest octave from which up the mass surely reaches top_p (the slack covers the
  // different summation order), so the sorted prefix lies in or above it and is found below.
  uint32_t lowest = 0;
  double above = 0.0;
  for (uint32_t e = 256; e-- > 0;) {
    above += octave_mass[e];
    if (above >= (top_p + kOctaveSlack) * mass) {
      lowest = e;
      break;
    }
  }
  for (int32_t id = 0; id < V; ++id) {
    if (octave(id) >= lowest) kept.push_back(id);
  }
  std::sort(kept.begin(), kept.end(), MoreProbable{probs});
  if (const size_t n = top_p_prefix(probs, kept, mass, top_p)) kept.resize(n);
}

}  // namespace jet
