// The CPU backend's FP8 row ops (backend.h, Fp8Rows): rmsnorm, add_rmsnorm and swiglu whose
// rows come out quantized to e4m3 with one scale each, and the product on such rows. Each row is
// computed in fp32 as the unquantized op computes it and quantized as matmul_fp8 quantizes its
// input, so each pair of ops equals the unfused pair exactly.
#include <vector>

#include "backend/cpu/cpu_backend_impl.h"
#include "backend/op_checks.h"
#include "core/fp8.h"

namespace jet::cpu {

namespace {

// Runs row(t, values) for each of T rows of `width` floats into a per-thread buffer, then
// quantizes the row into out's codes and scale.
template <typename Row>
void quantize_rows(int64_t T, int64_t width, Fp8Rows& out, Row row) {
  uint8_t* codes = out.codes.ptr<uint8_t>();
  float* scales = out.scales.ptr<float>();
#pragma omp parallel num_threads(threads_for(T* width))
  {
    std::vector<float> values(width);
#pragma omp for
    for (int64_t t = 0; t < T; ++t) {
      row(t, values.data());
      scales[t] = quantize_e4m3(values.data(), width, codes + t * width);
    }
  }
}

}  // namespace

void CpuBackend::matmul_fp8_rows(const Fp8Rows& x, const Linear& w, Tensor& out) {
  const MatmulShape s = check_matmul_fp8_rows_args(x, w, out, DType::F32);
  gemm_nt_fp8_rows(x.codes.ptr<uint8_t>(), x.scales.ptr<float>(),
                   {w.weight.ptr<uint8_t>(), w.scale.ptr<float>(), s.n, s.k, w.scaling}, out.ptr<float>(), s.m);
}

void CpuBackend::rmsnorm_fp8(const Tensor& x, const Tensor& w, float eps, Fp8Rows& out) {
  const RowsShape s = check_rmsnorm_fp8_args(x, w, out, DType::F32);
  const float *xp = x.ptr<float>(), *wp = w.ptr<float>();
  quantize_rows(s.rows, s.width, out,
                [&](int64_t t, float* row) { rmsnorm_row(xp + t * s.width, wp, eps, s.width, row); });
}

void CpuBackend::add_rmsnorm_fp8(Tensor& residual, const Tensor& x, const Tensor& w, float eps, Fp8Rows& out) {
  const RowsShape s = check_add_rmsnorm_fp8_args(residual, x, w, out, DType::F32);
  float* rp = residual.ptr<float>();
  const float *xp = x.ptr<float>(), *wp = w.ptr<float>();
  quantize_rows(s.rows, s.width, out, [&](int64_t t, float* row) {
    float* r = rp + t * s.width;
    for (int64_t i = 0; i < s.width; ++i) r[i] += xp[t * s.width + i];
    rmsnorm_row(r, wp, eps, s.width, row);
  });
}

void CpuBackend::swiglu_fp8(const Tensor& gate_up, Fp8Rows& out) {
  const RowsShape s = check_swiglu_fp8_args(gate_up, out, DType::F32);
  const float* in = gate_up.ptr<float>();
  quantize_rows(s.rows, s.width, out, [&](int64_t t, float* row) { swiglu_row(in + t * 2 * s.width, row, s.width); });
}

}  // namespace jet::cpu
