// The kept set K of top-k / top-p sampling (docs/decoding.md §3, step 5): the candidates the
// Gumbel-max draw may pick, found without sorting the whole vocabulary.
#pragma once

#include <cstdint>
#include <vector>

namespace jet {

// Ids by probability descending, ties to the lower id: the strict total order of §3.
struct MoreProbable {
  const float* probs;
  bool operator()(int32_t a, int32_t b) const { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); }
};

// Writes K into `kept`, most probable first; leaves it empty when K is every id (top_k <= 0 or
// >= V, and top_p >= 1). top_k keeps the top_k most probable ids; top_p then keeps the shortest
// most-probable prefix whose probability sum, renormalised over K, reaches top_p (at least one).
void select_kept_set(const float* probs, int V, int top_k, float top_p, std::vector<int32_t>& kept);

}  // namespace jet
