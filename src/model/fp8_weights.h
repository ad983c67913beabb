// FP8 projections in checkpoints (docs/fp8.md): the scale tensor beside an e4m3 weight, how its
// layout maps onto the engine's (Linear's scales, core/fp8.h), and the checks of both. Layouts:
//   <module>.weight_scale_inv [ceil(N/128), ceil(K/128)]  128x128 blocks (DeepSeek, Qwen3-FP8)
//   <module>.weight_scale     [] or [1]                   one per tensor (ModelOpt, vLLM fp8)
//   <module>.weight_scale     [N] or [N, 1]               one per output channel
// In each, the weight is code * scale; a per-tensor scale becomes a per-channel one, exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/fp8.h"
#include "model/tensor_source.h"

namespace jet {

struct Fp8Scale {
  const TensorInfo* tensor = nullptr;
  Fp8Scaling scaling = Fp8Scaling::PerChannel;  // the engine's layout it is read into
};

// The scale of the e4m3 weight `weight_name` [rows, cols] in `source`; on a missing, doubled or
// mis-shaped scale, sets `problem` to a sentence naming it (and returns no tensor).
Fp8Scale find_fp8_scale(const TensorSource& source, const std::string& weight_name, int64_t rows, int64_t cols,
                        std::string& problem);

// The engine's fp8_scale_count(scale.scaling, rows, cols) scales of that weight, as fp32; throws
// naming the tensor if one is negative or not finite.
void read_fp8_scale(const Fp8Scale& scale, int64_t rows, int64_t cols, float* out);

}  // namespace jet
