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

// One row-major product out[m, n] = x[m, k] · w[n, k]ᵀ of bf16 x and w, fp32 accumulation.
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  cudaDataType_t out_type = CUDA_R_16BF;  // CUDA_R_16BF or CUDA_R_32F
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

  // Enqueues the product on `stream` (x, w and out as the problem describes them).
  void run(const GemmProblem& problem, const void* x, const void* w, void* out, cudaStream_t stream);

 private:
  struct Plan;
  const Plan& plan_for(const GemmProblem& problem);

  cublasLtHandle_t lt_;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<GemmProblem, std::unique_ptr<Plan>> plans_;
};

// The alignment GemmProblem records for an operand address.
uint32_t operand_alignment(const void* ptr);

}  // namespace jet::cuda
