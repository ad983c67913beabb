// The CUDA backend: bf16 weights (or e4m3 projections), activations and KV cache, fp32
// accumulation and statistics, fp32 logits; the decode state lives on the device. Each op family has its own .cu file;
// this header is the class they all implement. Only src/backend/cuda includes CUDA headers.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace jet::cuda {

class GemmPlans;  // gemm_plans.h: cuBLASLt descriptors and algorithm per matmul shape

// Throws jet::Error naming the call and CUDA's message (every CUDA call is checked).
void check(cudaError_t status, const char* what);
void check(cublasStatus_t status, const char* what);
#define JET_CUDA_CHECK(call) ::jet::cuda::check((call), #call)

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;

  std::string name() const override;
  void use_on_this_thread() override;
  DType compute_dtype() const override { return DType::BF16; }

  Buffer alloc(size_t bytes) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  Buffer alloc_host(size_t bytes) override;
  void check_device_memory(const void* p, size_t bytes, const std::string& what) const override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void synchronize() override;
  size_t default_kv_budget_bytes(double memory_utilization) const override;
  size_t available_memory_bytes() const override;

  void embedding(const Tensor& ids, const Tensor& table, Tensor& out) override;  // elementwise.cu
  void matmul(const Tensor& x, const Tensor& w, Tensor& out) override;           // gemm.cu
  bool supports_fp8() const override { return true; }
  void matmul_fp8(const Tensor& x, const Linear& w, Tensor& out) override;          // fp8_gemm.cu
  void rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;  // norm_rope.cu
  void add_rmsnorm(Tensor& residual, const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void qk_norm_rope(Tensor& qkv, const Tensor& bias, const Tensor& q_norm, const Tensor& k_norm, float eps,
                    const ForwardBatch& batch, float rope_theta, int nh, int nkv, int hd, Tensor& k_cache,
                    Tensor& v_cache, int page_size, int rotary_dim) override;
  void attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, int page_size,
                 const ForwardBatch& batch, int nh, int nkv, int hd, Tensor& out) override;   // attention.cu
  void swiglu(const Tensor& gate_up, Tensor& out) override;                                   // elementwise.cu
  void moe(const Tensor& x, const MoeWeights& w, Tensor& out) override;                       // moe.cu
  void gather_block_tokens(const Tensor& blocks, const Tensor& slots, Tensor& ids) override;  // elementwise.cu
  void sample_positions(const Tensor& logits, int64_t first_row, const Tensor& rows, int num_rows,
                        DecodeState& st) override;                                                   // decode.cu
  void commit_step(const Tensor& rows, int num_rows, int64_t num_logits, DecodeState& st) override;  // decode.cu
  bool supports_vocab_parts() const override { return true; }
  void sample_vocab_parts(const Tensor& logits, int vocab0, int64_t first_row, const Tensor& rows, int num_rows,
                          DecodeState& st, Tensor& parts, int rank) override;  // decode.cu
  void combine_vocab_parts(const Tensor& parts, int64_t first_row, const Tensor& rows, int num_rows,
                           DecodeState& st) override;                                     // decode.cu
  void place_vocab_columns(const Tensor& logits, int vocab0, Tensor& whole) override;     // decode.cu
  void run_recorded(const std::string& key, const std::function<void()>& work) override;  // graphs.cu

  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }
  cublasLtHandle_t lt() const { return lt_; }
  void* gemm_workspace() const { return workspace_; }
  size_t gemm_workspace_bytes() const { return workspace_bytes_; }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  int* split_counters_ = nullptr;  // zero between kernels (skinny_gemm.h)
  int64_t num_split_counters_ = 0;
  Buffer moe_scratch_;  // moe.cu: routing, sorted routes, expert tiles and activations of one chunk
  Buffer fp8_scratch_;  // fp8_gemm.cu: x's e4m3 codes and scales
  std::unique_ptr<GemmPlans> gemm_plans_;
  // Bumped by every alloc() and every free of a Buffer it made (shared: a Buffer may outlive us).
  std::shared_ptr<std::atomic<uint64_t>> memory_epoch_ = std::make_shared<std::atomic<uint64_t>>(0);
  // Bytes of the Buffers alloc() made that are still alive (the KV budget's "held by us").
  std::shared_ptr<std::atomic<size_t>> allocated_bytes_ = std::make_shared<std::atomic<size_t>>(0);
  struct GraphCache;  // graphs.cu
  struct GraphCacheDeleter {
    void operator()(GraphCache* cache) const;
  };
  std::unique_ptr<GraphCache, GraphCacheDeleter> graphs_;
};

// Throws the row fault a finished denoise step recorded on the device, and clears it (decode.cu).
void throw_decode_fault();

// The visible CUDA devices (0, not an error, without a driver or a device).
int device_count();

}  // namespace jet::cuda
