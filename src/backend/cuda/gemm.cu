// The matmul op: out[M, N] = x[M, K] · w[N, K]ᵀ, bf16 operands, fp32 accumulation, bf16 or fp32
// output (the LM head writes fp32 logits). Up to 8 rows it runs our weight-streaming kernel
// (skinny_gemm.h), else cuBLASLt through the plan cache (gemm_plans.h) that makes each shape's
// descriptors and algorithm once; the plans serve matmul_fp8's e4m3 products too (fp8_gemm.cu).
#include <cstdint>

#include "backend/cuda/gemm_plans.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/skinny_gemm.h"

namespace jet::cuda {

namespace {

struct PreferenceDeleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PreferenceDeleter>;

template <typename T>
void set_preference(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, T value) {
  JET_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

const char* type_name(cudaDataType_t t) { return t == CUDA_R_32F ? "F32" : t == CUDA_R_8F_E4M3 ? "F8E4M3" : "BF16"; }

template <typename T>
void set_attribute(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const T& value) {
  JET_CUDA_CHECK(cublasLtMatmulDescSetAttribute(op, attr, &value, sizeof(value)));
}

}  // namespace

uint32_t operand_alignment(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

struct GemmPlans::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w_layout = nullptr, x_layout = nullptr, out_layout = nullptr;
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (out_layout) cublasLtMatrixLayoutDestroy(out_layout);
    if (x_layout) cublasLtMatrixLayoutDestroy(x_layout);
    if (w_layout) cublasLtMatrixLayoutDestroy(w_layout);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

GemmPlans::GemmPlans(cublasLtHandle_t lt, void* workspace, size_t workspace_bytes)
    : lt_(lt), workspace_(workspace), workspace_bytes_(workspace_bytes) {}

GemmPlans::~GemmPlans() = default;

// cuBLASLt is column-major. A row-major [r, c] matrix is the column-major [c, r] matrix with the
// same bytes, so the row-major out[M, N] = x · wᵀ is computed as the column-major
// outᶜ[N, M] = wᶜᵀ · xᶜ with wᶜ [K, N] and xᶜ [K, M]: A = w transposed, B = x as is ("TN", the
// layout cuBLASLt's Hopper kernels favour).
GemmPlans::Plan& GemmPlans::plan_for(const GemmProblem& p, const float* x_scales, const float* w_scales) {
  auto found = plans_.find(p);
  if (found != plans_.end()) return *found->second;

  auto plan = std::make_unique<Plan>();
  JET_CUDA_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_attribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_attribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (p.in_type == CUDA_R_8F_E4M3) {
    set_attribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, p.w_scale_mode);
    set_attribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, p.x_scale_mode);
    // The heuristic refuses scale modes without scale pointers; any call's will do.
    set_attribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w_scales);
    set_attribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, x_scales);
  }
  JET_CUDA_CHECK(cublasLtMatrixLayoutCreate(&plan->w_layout, p.in_type, p.k, p.n, p.k));
  JET_CUDA_CHECK(cublasLtMatrixLayoutCreate(&plan->x_layout, p.in_type, p.k, p.m, p.k));
  JET_CUDA_CHECK(cublasLtMatrixLayoutCreate(&plan->out_layout, p.out_type, p.n, p.m, p.n));

  cublasLtMatmulPreference_t raw_pref = nullptr;
  JET_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  const Preference pref(raw_pref);
  set_preference(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes_));
  set_preference(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p.align_w);
  set_preference(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p.align_x);
  set_preference(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p.align_out);
  set_preference(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p.align_out);

  cublasLtMatmulHeuristicResult_t best{};
  int found_count = 0;
  JET_CUDA_CHECK(cublasLtMatmulAlgoGetHeuristic(lt_, plan->op, plan->w_layout, plan->x_layout, plan->out_layout,
                                                plan->out_layout, raw_pref, 1, &best, &found_count));
  JET_CHECK(found_count > 0, "matmul: cuBLASLt has no algorithm for ", type_name(p.in_type), " x [", p.m, ", ", p.k,
            "] · w [", p.n, ", ", p.k, "]ᵀ -> ", type_name(p.out_type), " (operand alignments ", p.align_x, "/",
            p.align_w, "/", p.align_out, " bytes)");
  plan->algo = best.algo;
  return *plans_.emplace(p, std::move(plan)).first->second;
}

void GemmPlans::run(const GemmProblem& p, const void* x, const void* w, void* out, cudaStream_t stream,
                    const float* x_scales, const float* w_scales) {
  Plan& plan = plan_for(p, x_scales, w_scales);
  if (p.in_type == CUDA_R_8F_E4M3) {  // the pointers are read when the matmul is enqueued
    set_attribute(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w_scales);
    set_attribute(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, x_scales);
  }
  const float alpha = 1.0f, beta = 0.0f;
  JET_CUDA_CHECK(cublasLtMatmul(lt_, plan.op, &alpha, w, plan.w_layout, x, plan.x_layout, &beta, out, plan.out_layout,
                                out, plan.out_layout, &plan.algo, workspace_, workspace_bytes_, stream));
}

void CudaBackend::matmul(const Tensor& x, const Tensor& w, Tensor& out) {
  check_tensor(x, "matmul", "x", DType::BF16, {-1, -1});
  const int64_t M = x.dim(0), K = x.dim(1);
  check_tensor(w, "matmul", "w", DType::BF16, {-1, K});
  const int64_t N = w.dim(0);
  JET_CHECK(out.dtype == DType::BF16 || out.dtype == DType::F32, "matmul: tensor out is ", dtype_name(out.dtype),
            ", expected BF16 or F32");
  check_tensor(out, "matmul", "out", out.dtype, {M, N});
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum; cuBLASLt rejects a zero inner dimension
    JET_CUDA_CHECK(cudaMemsetAsync(out.data, 0, out.nbytes(), stream_));
    return;
  }
  if (skinny_gemm_fits(x, w)) {
    const SkinnyGemmScratch scratch{static_cast<float*>(workspace_), workspace_bytes_, split_counters_,
                                    num_split_counters_};
    return skinny_gemm(x, w, out, scratch, stream_);
  }
  GemmProblem problem;
  problem.m = M;
  problem.n = N;
  problem.k = K;
  problem.out_type = out.dtype == DType::F32 ? CUDA_R_32F : CUDA_R_16BF;
  problem.align_x = operand_alignment(x.data);
  problem.align_w = operand_alignment(w.data);
  problem.align_out = operand_alignment(out.data);
  gemm_plans_->run(problem, x.data, w.data, out.data, stream_);
}

}  // namespace jet::cuda
