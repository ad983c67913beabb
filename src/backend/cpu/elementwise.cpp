// Row-wise ops without reductions: embedding (row gather) and swiglu (silu(gate) * up).
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend_impl.h"

namespace jet::cpu {

void CpuBackend::embedding(const Tensor& ids, const Tensor& table, Tensor& out) {
  check_tensor(ids, "embedding", "ids", DType::I32, {-1});
  check_tensor(table, "embedding", "table", DType::F32, {-1, -1});
  const int64_t T = ids.dim(0), rows = table.dim(0), H = table.dim(1);
  check_tensor(out, "embedding", "out", DType::F32, {T, H});
  const int32_t* id = ids.ptr<int32_t>();
  for (int64_t t = 0; t < T; ++t) {  // validated before the parallel loop: a throw there would abort
    JET_CHECK(id[t] >= 0 && id[t] < rows, "embedding: token id ", id[t], " at row ", t,
              " is outside the embedding table of ", rows, " rows");
  }
  const float* src = table.ptr<float>();
  float* dst = out.ptr<float>();
#pragma omp parallel for num_threads(threads_for(T* H))
  for (int64_t t = 0; t < T; ++t) std::memcpy(dst + t * H, src + int64_t{id[t]} * H, H * sizeof(float));
}

void swiglu_row(const float* gate_up, float* out, int64_t inter) {
  const float* up = gate_up + inter;
  for (int64_t i = 0; i < inter; ++i) out[i] = gate_up[i] / (1.0f + std::exp(-gate_up[i])) * up[i];
}

void CpuBackend::swiglu(const Tensor& gate_up, Tensor& out) {
  check_tensor(gate_up, "swiglu", "gate_up", DType::F32, {-1, -1});
  const int64_t T = gate_up.dim(0), width = gate_up.dim(1);
  JET_CHECK(width % 2 == 0, "swiglu: gate_up width ", width, " is odd");
  check_tensor(out, "swiglu", "out", DType::F32, {T, width / 2});
  const int64_t inter = width / 2;
  const float* in = gate_up.ptr<float>();
  float* dst = out.ptr<float>();
#pragma omp parallel for num_threads(threads_for(T* width))
  for (int64_t t = 0; t < T; ++t) swiglu_row(in + t * width, dst + t * inter, inter);
}

}  // namespace jet::cpu
