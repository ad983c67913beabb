// Hopper's tensor memory accelerator as the grouped expert GEMMs use it: shared-memory mbarriers
// (a stage's "full" and "empty" signals), 2-D tensor-map loads that complete on an mbarrier, and
// the host-side encoding of a bf16 or e4m3 matrix's tensor map with 128-byte swizzled boxes.
// One thread issues a whole box, so a producer warp keeps many bytes in flight at little cost;
// the copy engine zero-fills what lies outside the matrix, which covers ragged edges.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "backend/cuda/kernel_util.cuh"

namespace jet::cuda {

// A box row is one 128-byte swizzle row: 64 bf16 or 128 e4m3 codes.
constexpr int kTmaBoxBytes = 128;
template <typename T>
constexpr int kTmaBoxCols = kTmaBoxBytes / sizeof(T);

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(arrivals));
}

// Makes the initialised barriers visible to the copy engine before any load names them.
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
}

// Arrives and tells the barrier to wait for `bytes` more of async copies.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
}

// Waits until the barrier's phase of the given parity has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n"
      "  .reg .pred done;\n"
      "WAIT_%=:\n"
      "  mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "  @!done bra WAIT_%=;\n"
      "}" ::"r"(shared_address(bar)),
      "r"(parity)
      : "memory");
}

// Loads the box at (column, row) of `map` into `dst` (1024-byte aligned for the swizzle) and
// counts its bytes on `bar`.
__device__ __forceinline__ void tma_load_box(void* dst, const CUtensorMap* map, int column, int row, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          shared_address(dst)),
      "l"(map), "r"(column), "r"(row), "r"(shared_address(bar))
      : "memory");
}

// Element (row, k) of a box of T as the 128-byte swizzle stores it: the 16-byte chunk c of row r
// sits at chunk c ^ (r % 8).
template <typename T>
__device__ __forceinline__ int swizzled_offset(int row, int k) {
  constexpr int kChunk = 16 / sizeof(T);
  return row * kTmaBoxCols<T> + (((k / kChunk) ^ (row % 8)) * kChunk) + k % kChunk;
}

// The tensor map of a row-major matrix [rows, cols] of bf16 (element_bytes 2) or e4m3 codes (1),
// rows 16-byte aligned, read in boxes of box_rows x one 128-byte row. Throws if the driver
// refuses it.
CUtensorMap tensor_map(const void* base, int64_t rows, int64_t cols, int element_bytes, int box_rows);

}  // namespace jet::cuda
