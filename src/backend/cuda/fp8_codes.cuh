// The e4m3 conversion of the CUDA backend's FP8 paths (docs/fp8.md §2): a group's scale from its
// largest magnitude, and a value's code under that scale, with the hardware's round-to-nearest-
// even, saturating conversion that core/fp8.h's f32_to_e4m3 matches.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace jet::cuda {

// scale = amax / 448, or 1 for an all-zero group (fp8.h's e4m3_scale).
__device__ __forceinline__ float e4m3_group_scale(float amax) { return amax > 0.0f ? amax / 448.0f : 1.0f; }

__device__ __forceinline__ uint8_t e4m3_code(float v, float scale) {
  return __nv_cvt_float_to_fp8(v / scale, __NV_SATFINITE, __NV_E4M3);
}

}  // namespace jet::cuda
