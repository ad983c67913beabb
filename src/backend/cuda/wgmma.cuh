// Hopper's warpgroup MMA (wgmma, sm_90a) as the grouped expert GEMMs use it, on bf16 or e4m3
// operands: both in shared memory as 128-byte swizzled, K-major tiles (the layout tma.cuh's
// tensor-map boxes land in), a warpgroup of four warps computing a 64 x 128 fp32 tile
// asynchronously; one instruction takes 32 bytes of k (16 bf16, 32 e4m3). The accumulator gives
// thread (warp w, lane l) of the warpgroup element i of rows w * 16 + l / 4 (+ 8 for i % 4 >= 2)
// and column (i / 4) * 8 + 2 (l % 4) + i % 2: mma.sync's m16n8 fragment, once per 8 columns.
#pragma once

#include <cstdint>

#include "backend/cuda/kernel_util.cuh"

namespace jet::cuda {

// The shared-memory matrix descriptor of a K-major tile of 128-byte rows in the 128-byte swizzle,
// starting at `tile` (1024-byte aligned, or that plus a multiple of 32 bytes to step k by one
// instruction): 8-row groups 1024 bytes apart; the leading offset is unused in this layout.
__device__ __forceinline__ uint64_t wgmma_descriptor(const void* tile) {
  const uint64_t address = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return ((address & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// Orders the warpgroup's register accesses before the wgmma that reads or writes them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Makes this thread's ordinary shared-memory stores visible to the async proxy (wgmma's operand
// reads, the copy engine), as when lanes, not tensor-map copies, filled a stage.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// The asm operand lists of a 64 x 128 fp32 accumulator d[64] (registers %0..%63).
#define JET_WGMMA_D_REGISTERS                                                        \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "          \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define JET_WGMMA_D_OPERANDS(d)                                                                               \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), \
      "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), \
      "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
      "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d[64 x 128] += a[64 x 16] * b[16 x 128]^T from descriptors of a (64 rows) and b (128 rows) of bf16.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " JET_WGMMA_D_REGISTERS
      ", %64, %65, p, 1, 1, 0, 0;\n"
      "}"
      : JET_WGMMA_D_OPERANDS(d)
      : "l"(a), "l"(b));
}

// d[64 x 128] += a[64 x 32] * b[32 x 128]^T of e4m3 codes (K-major, the only layout FP8 takes).
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " JET_WGMMA_D_REGISTERS
      ", %64, %65, p, 1, 1;\n"
      "}"
      : JET_WGMMA_D_OPERANDS(d)
      : "l"(a), "l"(b));
}

#undef JET_WGMMA_D_REGISTERS
#undef JET_WGMMA_D_OPERANDS

}  // namespace jet::cuda
