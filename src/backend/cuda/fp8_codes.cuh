// The e4m3 quantization rule every CUDA kernel that writes FP8 codes follows (docs/fp8.md): a
// group's scale is its amax / 448, or 1 for an all-zero group (fp8.h's e4m3_scale), and a value's
// code is the hardware's round-to-nearest-even of value / scale with saturation, which the CPU
// backend's f32_to_e4m3 matches.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace jet::cuda {

__device__ __forceinline__ float e4m3_group_scale(float amax) { return amax > 0.0f ? amax / 448.0f : 1.0f; }

__device__ __forceinline__ uint8_t e4m3_code(float value, float scale) {
  return __nv_cvt_float_to_fp8(value / scale, __NV_SATFINITE, __NV_E4M3);
}

}  // namespace jet::cuda
