// The CpuBackend class and the kernels its ops share. Each op family defines its members in its
// own file: cpu_backend.cpp (memory), gemm.cpp, norm_rope.cpp, elementwise.cpp, attention.cpp,
// moe.cpp, decode.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "backend/backend.h"
#include "backend/tensor_checks.h"

namespace jet::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int num_threads);

  std::string name() const override { return "cpu"; }
  DType compute_dtype() const override { return DType::F32; }

  Buffer alloc(size_t bytes) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  void synchronize() override {}
  size_t default_kv_budget_bytes(double memory_utilization) const override;
  size_t available_memory_bytes() const override;

  void embedding(const Tensor& ids, const Tensor& table, Tensor& out) override;
  void matmul(const Tensor& x, const Tensor& w, Tensor& out) override;
  bool supports_fp8() const override { return true; }
  bool supports_fp8_experts() const override { return true; }
  void matmul_fp8(const Tensor& x, const Linear& w, Tensor& out) override;
  void rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void add_rmsnorm(Tensor& residual, const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void qk_norm_rope(Tensor& qkv, const Tensor& bias, const Tensor& q_norm, const Tensor& k_norm, float eps,
                    const ForwardBatch& batch, float rope_theta, int nh, int nkv, int hd, Tensor& k_cache,
                    Tensor& v_cache, int page_size, int rotary_dim) override;
  void attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, int page_size,
                 const ForwardBatch& batch, int nh, int nkv, int hd, Tensor& out) override;
  void swiglu(const Tensor& gate_up, Tensor& out) override;
  void moe(const Tensor& x, const MoeWeights& w, Tensor& out) override;

  void gather_block_tokens(const Tensor& blocks, const Tensor& slots, Tensor& ids) override;
  void sample_positions(const Tensor& logits, int64_t first_row, const Tensor& rows, int num_rows,
                        DecodeState& st) override;
  void commit_step(const Tensor& rows, int num_rows, int64_t num_logits, DecodeState& st) override;
  bool supports_vocab_parts() const override { return true; }
  void sample_vocab_parts(const Tensor& logits, int vocab0, int64_t first_row, const Tensor& rows, int num_rows,
                          DecodeState& st, Tensor& parts, int rank) override;
  void combine_vocab_parts(const Tensor& parts, int64_t first_row, const Tensor& rows, int num_rows,
                           DecodeState& st) override;
  void place_vocab_columns(const Tensor& logits, int vocab0, Tensor& whole) override;
};

// Threads of every parallel loop of the CPU ops (set by the backend's constructor). Passed to each
// loop explicitly because omp_set_num_threads only reaches the calling thread, and the engine
// may run ops from another thread than the one that made the backend.
int thread_count();
// Threads for a loop over `work` cheap elements: one below a grain, since waking a thread pool
// costs more than a few thousand additions (and far more when the cores are busy).
inline int threads_for(int64_t work) { return work < (int64_t{1} << 15) ? 1 : thread_count(); }

// Row-major fp32 products through OpenBLAS, split over the threads unless called from inside a
// parallel loop (then on the calling thread alone). gemm_nt: out[M, N] = x[M, K] · w[N, K]ᵀ;
// gemm_nn: out[M, N] = a[M, K] · b[K, N].
void gemm_nt(const float* x, const float* w, float* out, int64_t M, int64_t N, int64_t K);
void gemm_nn(const float* a, const float* b, float* out, int64_t M, int64_t N, int64_t K);

// One FP8 weight matrix [rows, cols] (a Linear, or one expert's part of a stacked one).
struct Fp8Matrix {
  const uint8_t* codes = nullptr;
  const float* scale = nullptr;  // [rows] or [ceil(rows/128), ceil(cols/128)], by scaling
  int64_t rows = 0, cols = 0;
  Fp8Scaling scaling = Fp8Scaling::PerChannel;
};
// Expert e's matrix of a stacked FP8 Linear [E, rows, cols].
Fp8Matrix expert_matrix(const Linear& w, int64_t e);
// out[M, N] = x[M, K] · wᵀ under FP8 (Backend::matmul_fp8), emulated in fp32: x is rounded to
// e4m3 with its dynamic scales and back, w decoded, and the two multiplied by gemm_nt. The
// products of e4m3 values are exact in fp32, so this differs from an FP8 GEMM with fp32
// accumulation by fp32 rounding only.
void gemm_nt_fp8(const float* x, const Fp8Matrix& w, float* out, int64_t M);

// out[i] = silu(gate_up[i]) * gate_up[inter + i] for one row of gate_up [2 * inter].
void swiglu_row(const float* gate_up, float* out, int64_t inter);

}  // namespace jet::cpu
