// The matmul op's kernel for a few rows (skinny_gemm.cu), used in place of cuBLASLt where it fits.
#pragma once

#include <cuda_runtime.h>

#include "backend/tensor.h"

namespace jet::cuda {

// Rows up to which the kernel runs; above it x's loads grow to match the weights' and cuBLASLt's
// tiles win.
constexpr int64_t kSkinnyGemmMaxRows = 8;

// Whether out = x · wᵀ (x [M, K] and w [N, K], both bf16 or both e4m3 codes, checked by the
// caller) runs on the kernel: 1 <= M <= kSkinnyGemmMaxRows, K a whole number of 16-byte loads
// (8 bf16, 16 e4m3) and both operands 16-byte aligned.
bool skinny_gemm_fits(const Tensor& x, const Tensor& w);

// Device memory the K splits use: partial sums (any contents; the GEMM workspace, idle while this
// kernel runs in its place) and one counter per column tile, all zero (and left zero).
struct SkinnyGemmScratch {
  float* partial = nullptr;
  size_t partial_bytes = 0;
  int* counters = nullptr;
  int64_t num_counters = 0;
};

// Enqueues out[M, N] = x · wᵀ (fp32 accumulation; out bf16 or f32) on `stream`. e4m3 operands
// come with their scales, x_scales [M] and w_scales [N]: out[m, n] = x_scales[m] * w_scales[n] *
// Σ_k x[m, k] * w[n, k].
void skinny_gemm(const Tensor& x, const Tensor& w, Tensor& out, const SkinnyGemmScratch& scratch, cudaStream_t stream,
                 const float* x_scales = nullptr, const float* w_scales = nullptr);

}  // namespace jet::cuda
