// The e4m3 conversion every CUDA kernel that writes FP8 codes uses (docs/fp8.md), beside the
// scaling rule they share with the CPU backend (core/fp8.h's e4m3_scale): a value's code is the
// hardware's round-to-nearest-even of value / scale with saturation, which the CPU backend's
// f32_to_e4m3 matches.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "core/fp8.h"

namespace jet::cuda {

__device__ __forceinline__ uint8_t e4m3_code(float value, float scale) {
  return __nv_cvt_float_to_fp8(value / scale, __NV_SATFINITE, __NV_E4M3);
}

}  // namespace jet::cuda
