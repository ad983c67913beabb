// What the CUDA op files share: bf16 element access, warp/block reductions, launch sizing and
// the launch check, and the argument validation every op starts with (backend/tensor_checks.h,
// shared with the CPU backend so both reject a bad call with the same message).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/tensor_checks.h"

namespace jet::cuda {

using bf16 = __nv_bfloat16;

// Throws if the last kernel launch failed (bad configuration); errors inside a kernel surface at
// the next synchronising call.
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

// Blocks of `threads` covering n elements, capped so a grid-stride loop does the rest.
inline unsigned blocks_for(int64_t n, int threads) {
  constexpr int64_t kMaxBlocks = int64_t{1} << 20;
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : 0.0f;
    v = warp_sum(v);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

}  // namespace jet::cuda
