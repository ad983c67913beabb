// Sampling one masked position of a block from its logit row (docs/decoding.md §3): mask and
// repetition penalty, softmax, entropy, top-k / top-p, seeded Gumbel-max, confidence and margin.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace jet {

struct PositionSample {
  int32_t token = 0;        // the candidate x̂
  float confidence = 0.0f;  // probs[x̂] of the unfiltered distribution
  float logprob = 0.0f;     // ln(max(confidence, 1e-12))
  float entropy = 0.0f;     // nats
  float margin = 0.0f;      // largest minus second largest probability
};

// `logits` is the row of V fp32 logits; it is overwritten (it ends up holding the probabilities).
// `seen` is the repetition-penalty bitmap ((V + 31) / 32 words, bit id of word id / 32), or null.
// position is the absolute position of the block token, global_step the sequence's denoise step;
// together with params.seed they key the random draws. temperature <= 0 means greedy.
PositionSample sample_position(float* logits, int V, const SlotParams& params, const uint32_t* seen,
                               int32_t position, int32_t global_step);

}  // namespace jet
