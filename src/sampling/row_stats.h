// The pieces of sampling one logits row that sample_position (one whole row) and the vocabulary
// parts of tensor-parallel ranks (vocab_parts.h: a slice of a row each) share: the repetition
// penalty, the argmax, softmax with its entropy and top two probabilities, the Gumbel-max draw.
#pragma once

#include <cstdint>
#include <vector>

namespace jet {

// Ids [vocab0, vocab0 + n) of the row are logits[0, n); `seen` is the whole vocabulary's
// repetition-penalty bitmap (bit id % 32 of word id / 32).
void apply_repetition_penalty(float* logits, int n, int vocab0, const uint32_t* seen, float penalty);

// The first index of the largest value.
int argmax_lowest_id(const float* values, int n);

struct SoftmaxStats {
  double entropy = 0.0;
  float p1 = 0.0f, p2 = 0.0f;  // the two largest probabilities
  int32_t top_id = 0;          // the lowest index of probability p1
  float max_scaled = 0.0f;     // the largest logit / T
  double sum = 0.0;            // Σ exp(logit / T - max_scaled)
};

// row <- softmax(row / T) with the row maximum subtracted, in place.
SoftmaxStats softmax_in_place(float* row, int n, float T);

// The Gumbel-max draw over the kept indices (all n when `kept` is empty): argmax of
// ln(probs[i]) + g(vocab0 + i) in float64, g drawn from lane vocab0 + i of rng_prefix, lowest
// index on ties; most_probable (an index of the largest probability, always kept) starts the search.
// *score receives the winner's ln(p) + g.
int32_t gumbel_max(const float* probs, int n, const std::vector<int32_t>& kept, int32_t most_probable,
                   uint64_t rng_prefix, int vocab0 = 0, double* score = nullptr);

}  // namespace jet
