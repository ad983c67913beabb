// What both paged-attention kernels share (attention.cu includes it, and the kernels' headers):
// the launch parameters, the CTA's place in the batch, key visibility and the paged cache lookup,
// and the PTX primitives (cp.async, ldmatrix, bf16 mma.sync with fp32 accumulate).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/kernel_util.cuh"

namespace jet::cuda::attention_detail {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 2;  // K/V tiles in shared memory: the next loads while the warps use the current
// bf16 padding per shared-memory row: consecutive rows start 16 bytes apart in the banks, so the
// 8 row addresses of one ldmatrix hit 8 different bank groups.
constexpr int kRowPad = 8;
constexpr float kLog2e = 1.4426950408889634f;

// Everything the kernels read, passed by value.
struct Params {
  const bf16* qkv;  // [T, (nh + 2 nkv) * hd]
  bf16* k_cache;    // [pages, page_size, nkv, hd]
  bf16* v_cache;
  bf16* out;              // [T, nh * hd]
  float* partial_out;     // [splits, T * nh, hd], unnormalised, when num_splits > 1
  float2* partial_stats;  // [splits, T * nh]: (row max in log2 units, row sum)
  const int32_t* positions;
  const int32_t* seq_starts;
  const int32_t* cached_lens;
  const int32_t* page_table;
  int num_tokens, max_pages, page_size, mask_block, nh, nkv, num_splits;  // head_dim is the kernels' HD
  float scale_log2;  // 1/sqrt(hd) * log2(e): the softmax runs in base 2 (ex2 is one instruction)
};

// Keys a query at `position` may see among `key_count`: everything, or up to the end of its block.
__device__ __forceinline__ int visible_keys(int position, int key_count, int mask_block) {
  return mask_block > 0 ? min(key_count, (position / mask_block + 1) * mask_block) : key_count;
}

__device__ __forceinline__ int64_t cache_row(const Params& p, int seq, int position) {
  return paged_slot(p.page_table, p.max_pages, p.page_size, seq, position);
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// A running max of -inf means "no key yet": rescaling against it must give 0, not NaN.
__device__ __forceinline__ float max_or_zero(float m) { return m == -INFINITY ? 0.0f : m; }

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// --- Tensor-core and async-copy primitives (PTX) ---------------------------------------------------

// 16-byte global->shared copy; with `valid` false the destination is zero-filled and nothing is read.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending));
}

// Four 8x8 bf16 matrices; lane i gives the address of row i % 8 of matrix i / 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16* smem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* smem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// acc[16x8] += a[16x16] * b[16x8]; bf16 inputs, fp32 accumulators (the PTX fragment layouts).
__device__ __forceinline__ void mma_bf16(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Where the CTA's rows are: rows [row0, row0 + kBlockRows) of sequence `seq`'s num_rows rows.
struct CtaRows {
  int seq, kv_head, split, group, seq_begin, num_rows, row0;
  // Packed token and q head of row r (r < num_rows).
  __device__ int token(int r) const { return seq_begin + r / group; }
  __device__ int head(int r) const { return kv_head * group + r % group; }
};

}  // namespace jet::cuda::attention_detail
