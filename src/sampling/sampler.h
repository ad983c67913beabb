// Sampling one masked position of a block from its logit row (docs/decoding.md §3): mask and
// repetition penalty, softmax, entropy, top-k / top-p, seeded Gumbel-max, confidence and margin.
#pragma once

#include <cstdint>

#include "sampling/sampling_types.h"

namespace jet {

// `logits` is the row of V fp32 logits; it is overwritten (it ends up holding the probabilities).
// `seen` is the repetition-penalty bitmap ((V + 31) / 32 words, bit id of word id / 32), or null.
// position is the absolute position of the block token, global_step the sequence's denoise step;
// together with params.seed they key the random draws. temperature <= 0 means greedy.
PositionSample sample_position(float* logits, int V, const SlotParams& params, const uint32_t* seen, int32_t position,
                               int32_t global_step);

}  // namespace jet
