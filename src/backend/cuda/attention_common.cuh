// What both paged-attention kernels share (attention.cu includes it, and the kernels' headers):
// the launch parameters, the CTA's place in the batch, key visibility and the paged cache lookup
// (the PTX primitives are mma_ptx.cuh's).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/mma_ptx.cuh"

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

// Where the CTA's rows are: rows [row0, row0 + kBlockRows) of sequence `seq`'s num_rows rows.
struct CtaRows {
  int seq, kv_head, split, group, seq_begin, num_rows, row0;
  // Packed token and q head of row r (r < num_rows).
  __device__ int token(int r) const { return seq_begin + r / group; }
  __device__ int head(int r) const { return kv_head * group + r % group; }
};

}  // namespace jet::cuda::attention_detail
