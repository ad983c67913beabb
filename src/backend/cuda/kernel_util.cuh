// What the CUDA op files share: bf16 element access, warp/block reductions, launch sizing and
// the launch check, and the argument validation every op starts with (backend/tensor_checks.h,
// shared with the CPU backend so both reject a bad call with the same message).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "backend/cuda/cuda_backend.h"
#include "backend/tensor_checks.h"

namespace jet::cuda {

using bf16 = __nv_bfloat16;

// Throws if the last kernel launch failed (bad configuration); errors inside a kernel surface at
// the next synchronising call.
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

// N consecutive bf16 moved as one access (16 bytes for N = 8): the row kernels use N = 8 when
// the row width and the pointers allow it, else N = 1, with the same per-element arithmetic.
template <int N>
struct alignas(N * sizeof(bf16)) BfPack {
  bf16 v[N];
};

template <int N>
__device__ __forceinline__ BfPack<N> load_pack(const bf16* p) {
  return *reinterpret_cast<const BfPack<N>*>(p);
}

template <int N>
__device__ __forceinline__ void store_pack(bf16* p, const BfPack<N>& pack) {
  *reinterpret_cast<BfPack<N>*>(p) = pack;
}

// Whether rows of `width` bf16 starting at each pointer can be moved 8 elements at a time.
inline bool packs_of_8(int64_t width, std::initializer_list<const void*> pointers) {
  if (width % 8 != 0) return false;
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

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
