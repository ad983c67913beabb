// Matrix products: gemm_nt (the OpenBLAS call every projection and expert goes through),
// gemm_nn (attention's probabilities times values) and the matmul op. OpenBLAS runs
// single-threaded (see CpuBackend's constructor); the products are split into OpenMP tasks here.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <limits>

#include "backend/cpu/cpu_backend_impl.h"

namespace jet::cpu {

namespace {

// Multiply-adds below which splitting a product over threads costs more than it saves.
constexpr int64_t kMinParallelWork = int64_t{1} << 18;

// out[M, N] = a[M, K] · op(b), op(b) = bᵀ of b[N, K] or b itself of b[K, N].
void sgemm(CBLAS_TRANSPOSE transpose_b, const float* a, const float* b, float* out, int64_t M, int64_t N, int64_t K) {
  constexpr int64_t kMaxBlasDim = std::numeric_limits<int>::max();  // cblas takes int sizes
  JET_CHECK(M <= kMaxBlasDim && N <= kMaxBlasDim && K <= kMaxBlasDim, "matmul: sizes ", M, " x ", N, " x ", K,
            " exceed the BLAS int range");
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum; BLAS would reject the zero leading dimension
    std::fill(out, out + M * N, 0.0f);
    return;
  }
  const int n = static_cast<int>(N), k = static_cast<int>(K);
  const int ldb = transpose_b == CblasTrans ? k : n;
  // Split the larger output dimension into one part per thread (columns in multiples of 16 so
  // every part keeps whole vector lanes); tiny products, and products asked for from inside a
  // parallel loop, stay in one call on the calling thread.
  const int threads = M * N * K < kMinParallelWork || omp_in_parallel() ? 1 : thread_count();
  const bool split_columns = N >= M;
  const int64_t extent = split_columns ? N : M;
  const int64_t align = split_columns ? 16 : 1;
  const int64_t part = std::max(align, (extent / threads + align - 1) / align * align);
  const int64_t parts = (extent + part - 1) / part;
#pragma omp parallel for num_threads(threads)
  for (int64_t i = 0; i < parts; ++i) {
    const int64_t begin = i * part, size = std::min(part, extent - begin);
    if (split_columns) {
      const float* b_part = transpose_b == CblasTrans ? b + begin * K : b + begin;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b, static_cast<int>(M), static_cast<int>(size), k, 1.0f, a, k,
                  b_part, ldb, 0.0f, out + begin, n);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b, static_cast<int>(size), n, k, 1.0f, a + begin * K, k, b,
                  ldb, 0.0f, out + begin * N, n);
    }
  }
}

}  // namespace

void gemm_nt(const float* x, const float* w, float* out, int64_t M, int64_t N, int64_t K) {
  sgemm(CblasTrans, x, w, out, M, N, K);
}

void gemm_nn(const float* a, const float* b, float* out, int64_t M, int64_t N, int64_t K) {
  sgemm(CblasNoTrans, a, b, out, M, N, K);
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
