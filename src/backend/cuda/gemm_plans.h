// The matmul op's cuBLASLt plans. A plan (matmul descriptor, the three matrix layouts and the
// algorithm cuBLASLt's heuristic ranks first) is made on a problem's first call and reused for
// every later call of that problem, so a product costs one map lookup and one cublasLtMatmul.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <compare>
#include <cstdint>
#include <map>
#include <memory>

namespace jet::cuda {

// One row-major product out[m, n] = x[m, k] · w[n, k]ᵀ, fp32 accumulation, of bf16 x and w, or
// of e4m3 codes whose fp32 scales cuBLASLt applies as the scale modes say (matmul_fp8).
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  cudaDataType_t in_type = CUDA_R_16BF;   // x's and w's: CUDA_R_16BF or CUDA_R_8F_E4M3
  cudaDataType_t out_type = CUDA_R_16BF;  // CUDA_R_16BF or CUDA_R_32F
  // e4m3 only: one scale per row (OUTER_VEC_32F), or per 128x128 weight tile and per row and 128
  // columns of x (BLK128x128_32F / VEC128_32F).
  cublasLtMatmulMatrixScale_t w_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  cublasLtMatmulMatrixScale_t x_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  // The largest power of two, at most 256 (cuBLASLt's default assumption), dividing each
  // operand's address. cuBLASLt picks vectorised kernels for aligned operands, so a plan is only
  // valid for operands aligned at least as well as those it was made for: alignment is part of
  // the problem. (cudaMalloc memory is 256-byte aligned, so whole tensors get the default plans.)
  uint32_t align_x = 256, align_w = 256, align_out = 256;

  auto operator<=>(const GemmProblem&) const = default;
};

class GemmPlans {
 public:
  // The workspace (device memory) is shared by every plan; products run one at a time on a stream.
  GemmPlans(cublasLtHandle_t lt, void* workspace, size_t workspace_bytes);
  ~GemmPlans();
  GemmPlans(const GemmPlans&) = delete;
  GemmPlans& operator=(const GemmPlans&) = delete;

  // Enqueues the product on `stream` (x, w and out as the problem describes them; e4m3 operands
  // with their scales' device memory).
  void run(const GemmProblem& problem, const void* x, const void* w, void* out, cudaStream_t stream,
           const float* x_scales = nullptr, const float* w_scales = nullptr);

 private:
  struct Plan;
  Plan& plan_for(const GemmProblem& problem, const float* x_scales, const float* w_scales);

  cublasLtHandle_t lt_;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<GemmProblem, std::unique_ptr<Plan>> plans_;
};

// The alignment GemmProblem records for an operand address.
uint32_t operand_alignment(const void* ptr);

}  // namespace jet::cuda
