// Matrix products: gemm_nt (the OpenBLAS call every projection and expert goes through),
// gemm_nn (attention's probabilities times values), the matmul op and its FP8 twin. OpenBLAS runs
// single-threaded (see CpuBackend's constructor); the products are split into OpenMP tasks here.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend_impl.h"
#include "backend/op_checks.h"
#include "core/fp8.h"

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

Fp8Matrix expert_matrix(const Linear& w, int64_t e) {
  const int64_t rows = w.weight.dim(1), cols = w.weight.dim(2);
  const int64_t scales = fp8_scale_count(w.scaling, rows, cols);
  return {w.weight.ptr<uint8_t>() + e * rows * cols, w.scale.ptr<float>() + e * scales, rows, cols, w.scaling};
}

void gemm_nt_fp8(const float* x, const Fp8Matrix& w, float* out, int64_t M) {
  const int64_t N = w.rows, K = w.cols;
  const bool blocks = w.scaling == Fp8Scaling::Block128;
  const int64_t group = blocks ? 128 : std::max<int64_t>(K, 1);
  const int64_t k_blocks = (K + 127) / 128;
  // Independent rows: the decode of each may run on another thread (not from inside a parallel
  // loop, where the MoE calls this per expert).
  const int threads = omp_in_parallel() ? 1 : threads_for((M + N) * K);
  std::vector<float> xq(M * K), wq(N * K);
#pragma omp parallel num_threads(threads)
  {
    std::vector<uint8_t> codes(group);
#pragma omp for
    for (int64_t r = 0; r < M; ++r) {
      for (int64_t k0 = 0; k0 < K; k0 += group) {
        const int64_t n = std::min(group, K - k0);
        const float scale = quantize_e4m3(x + r * K + k0, n, codes.data());
        for (int64_t i = 0; i < n; ++i) xq[r * K + k0 + i] = e4m3_to_f32(codes[i]) * scale;
      }
    }
#pragma omp for
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < K; ++k) {
        const float scale = blocks ? w.scale[n / 128 * k_blocks + k / 128] : w.scale[n];
        wq[n * K + k] = e4m3_to_f32(w.codes[n * K + k]) * scale;
      }
    }
  }
  gemm_nt(xq.data(), wq.data(), out, M, N, K);
}

void CpuBackend::matmul_fp8(const Tensor& x, const Linear& w, Tensor& out) {
  const MatmulShape s = check_matmul_fp8_args(x, w, out, DType::F32);
  gemm_nt_fp8(x.ptr<float>(), {w.weight.ptr<uint8_t>(), w.scale.ptr<float>(), s.n, s.k, w.scaling}, out.ptr<float>(),
              s.m);
}

}  // namespace jet::cpu
