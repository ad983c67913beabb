// Matrix products: gemm_nt (the one OpenBLAS call every projection and expert goes through)
// and the matmul op.
#include <cblas.h>

#include <algorithm>
#include <limits>

#include "backend/cpu/cpu_backend_impl.h"

namespace jet::cpu {

void gemm_nt(const float* x, const float* w, float* out, int64_t M, int64_t N, int64_t K) {
  constexpr int64_t kMaxBlasDim = std::numeric_limits<int>::max();  // cblas takes int sizes
  JET_CHECK(M <= kMaxBlasDim && N <= kMaxBlasDim && K <= kMaxBlasDim, "matmul: sizes ", M, " x ", N, " x ", K,
            " exceed the BLAS int range");
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum; BLAS would reject the zero leading dimension
    std::fill(out, out + M * N, 0.0f);
    return;
  }
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, out, n);
}

void CpuBackend::matmul(const Tensor& x, const Tensor& w, Tensor& out) {
  check_tensor(x, "matmul", "x", DType::F32, {-1, -1});
  const int64_t M = x.dim(0), K = x.dim(1);
  check_tensor(w, "matmul", "w", DType::F32, {-1, K});
  const int64_t N = w.dim(0);
  check_tensor(out, "matmul", "out", DType::F32, {M, N});
  gemm_nt(x.ptr<float>(), w.ptr<float>(), out.ptr<float>(), M, N, K);
}

}  // namespace jet::cpu
