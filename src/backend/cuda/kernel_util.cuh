// What the CUDA op files share: bf16 element access, warp/block reductions, launch sizing (grid
// size, wave fill) and
// the launch check, and the argument validation every op starts with (backend/tensor_checks.h,
// shared with the CPU backend so both reject a bad call with the same message).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "backend/tensor_checks.h"

namespace jet::cuda {

using bf16 = __nv_bfloat16;

// Throws if the last kernel launch failed (bad configuration); errors inside a kernel surface at
// the next synchronising call.
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

// Programmatic dependent launch (Hopper). Our kernels are launched with launch_kernel, which lets
// the GPU start a kernel's CTAs while the kernel before it on the stream is still finishing, so
// their launch overlaps the previous kernel's tail instead of following it (a few percent at
// batch 1, where launches dominate). The contract: every kernel launched this way calls
// await_previous_kernel() before it writes global memory or reads what a kernel wrote; it waits
// until the previous kernel has finished and its writes are visible, then lets the next kernel
// launch. Before the wait a kernel may read only what no kernel writes: a forward's batch layout
// (ForwardBatch's positions, seq_starts, cached_lens and page_table), which the host uploads
// before the forward's first kernel, is read there by qk_norm_rope and attention, and
// qk_norm_rope reads its norm weights there (no kernel of a forward writes weights). (Prefetching
// the weights before the wait slowed the few-rows matmul.) JET_PDL=0 launches them plainly.
__device__ __forceinline__ void await_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

bool programmatic_launch_enabled();  // cuda_backend.cu: JET_PDL, read once

template <typename... KernelArgs, typename... Args>
void launch_kernel(const char* name, void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = programmatic_launch_enabled() ? 1 : 0;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  check(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), name);
}

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

// Whether every pointer is on a 16-byte boundary (vector loads).
inline bool aligned_16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

// Whether rows of `width` bf16 starting at each pointer can be moved 8 elements at a time.
inline bool packs_of_8(int64_t width, std::initializer_list<const void*> pointers) {
  return width % 8 == 0 && aligned_16(pointers);
}

// Blocks of `threads` covering n elements, capped so a grid-stride loop does the rest.
inline unsigned blocks_for(int64_t n, int threads) {
  constexpr int64_t kMaxBlocks = int64_t{1} << 20;
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

// The device's multiprocessors.
inline int multiprocessor_count() {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  return sms;
}

// How many pieces to cut each of `ctas` CTAs' work into when they alone fill the GPU's `slots`
// (multiprocessors x resident CTAs each) poorly: the fewest splits, up to max_splits, within 10%
// of the best share of the launched waves' slots that hold a CTA. A last wave that is mostly
// empty idles the GPU for a whole CTA time (256 CTAs on 396 slots take two waves for 1.3 waves
// of work; 3 splits take two waves for 1.9).
inline int splits_for_wave_fill(int64_t ctas, int64_t slots, int64_t max_splits) {
  ctas = ctas < 1 ? 1 : ctas;
  auto fill = [&](int64_t splits) {
    const int64_t total = ctas * splits;
    return static_cast<double>(total) / static_cast<double>((total + slots - 1) / slots * slots);
  };
  double best = 0.0;
  for (int64_t s = 1; s <= max_splits; ++s) best = fill(s) > best ? fill(s) : best;
  for (int64_t s = 1; s <= max_splits; ++s) {
    if (fill(s) >= 0.9 * best) return static_cast<int>(s);
  }
  return 1;
}

// The reductions below combine with one of these.
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {  // fmaxf: a NaN loses to any number, as std::fmax on the CPU
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// The reduction over the kLanes lanes of this lane's aligned group (kLanes a power of two, at
// most 32); every lane of the warp must take part.
template <int kLanes, typename Op = SumOp>
__device__ __forceinline__ float lane_group_reduce(float v, Op op = {}) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

template <int kLanes>
__device__ __forceinline__ float lane_group_sum(float v) {
  return lane_group_reduce<kLanes>(v);
}

__device__ __forceinline__ float warp_sum(float v) { return lane_group_sum<32>(v); }

// The reduction over the whole block (blockDim.x a multiple of 32, at most 1024) of values whose
// identity is `identity`; every thread gets it.
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, Op op, float identity) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = lane_group_reduce<32>(v, op);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : identity;
    v = lane_group_reduce<32>(v, op);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

__device__ __forceinline__ float block_sum(float v) { return block_reduce(v, SumOp{}, 0.0f); }

}  // namespace jet::cuda
