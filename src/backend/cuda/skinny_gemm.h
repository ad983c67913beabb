// The matmul op's kernel for a few rows (skinny_gemm.cu), used in place of cuBLASLt where it fits.
#pragma once

#include <cuda_runtime.h>

#include "backend/tensor.h"

namespace jet::cuda {

// Rows up to which the kernel runs; above it x's loads grow to match the weights' and cuBLASLt's
// tiles win.
constexpr int64_t kSkinnyGemmMaxRows = 8;

// Whether out = x · wᵀ (bf16 x [M, K] and w [N, K], checked by the caller) runs on the kernel:
// 1 <= M <= kSkinnyGemmMaxRows, K a multiple of 8 and both operands 16-byte aligned.
bool skinny_gemm_fits(const Tensor& x, const Tensor& w);

// Device memory the K splits use: partial sums (any contents; the GEMM workspace, idle while this
// kernel runs in its place) and one counter per column tile, all zero (and left zero).
struct SkinnyGemmScratch {
  float* partial = nullptr;
  size_t partial_bytes = 0;
  int* counters = nullptr;
  int64_t num_counters = 0;
};

// Enqueues out[M, N] = x · wᵀ (fp32 accumulation; out bf16 or f32) on `stream`.
void skinny_gemm(const Tensor& x, const Tensor& w, Tensor& out, const SkinnyGemmScratch& scratch, cudaStream_t stream);

}  // namespace jet::cuda
