// Forwards every op to the wrapped backend and times it.
#include "backend/profiling_backend.h"

#include <chrono>

namespace jet {

namespace {

class ProfilingBackend final : public Backend {
 public:
  ProfilingBackend(std::unique_ptr<Backend> inner, std::shared_ptr<OpProfile> profile)
      : inner_(std::move(inner)), profile_(std::move(profile)) {}

  std::string name() const override { return inner_->name(); }
  void use_on_this_thread() override { inner_->use_on_this_thread(); }
  DType compute_dtype() const override { return inner_->compute_dtype(); }
  Buffer alloc(size_t bytes) override { return inner_->alloc(bytes); }
  void upload(void* dst, const void* src, size_t bytes) override { inner_->upload(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { inner_->download(dst, src, bytes); }
  void synchronize() override { inner_->synchronize(); }
  size_t default_kv_budget_bytes(double memory_utilization) const override {
    return inner_->default_kv_budget_bytes(memory_utilization);
  }
  size_t available_memory_bytes() const override { return inner_->available_memory_bytes(); }

  void embedding(const Tensor& ids, const Tensor& table, Tensor& out) override {
    timed("embedding", [&] { inner_->embedding(ids, table, out); });
  }
  void matmul(const Tensor& x, const Tensor& w, Tensor& out) override {
    timed("matmul", [&] { inner_->matmul(x, w, out); });
  }
  bool supports_fp8() const override { return inner_->supports_fp8(); }
  bool supports_fp8_experts() const override { return inner_->supports_fp8_experts(); }
  bool supports_vocab_parts() const override { return inner_->supports_vocab_parts(); }
  void matmul_fp8(const Tensor& x, const Linear& w, Tensor& out) override {
    timed("matmul_fp8", [&] { inner_->matmul_fp8(x, w, out); });
  }
  void rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    timed("rmsnorm", [&] { inner_->rmsnorm(x, w, eps, out); });
  }
  void add_rmsnorm(Tensor& residual, const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    timed("add_rmsnorm", [&] { inner_->add_rmsnorm(residual, x, w, eps, out); });
  }
  void qk_norm_rope(Tensor& qkv, const Tensor& bias, const Tensor& q_norm, const Tensor& k_norm, float eps,
                    const ForwardBatch& batch, float rope_theta, int nh, int nkv, int hd, Tensor& k_cache,
                    Tensor& v_cache, int page_size, int rotary_dim) override {
    timed("qk_norm_rope", [&] {
      inner_->qk_norm_rope(qkv, bias, q_norm, k_norm, eps, batch, rope_theta, nh, nkv, hd, k_cache, v_cache, page_size,
                           rotary_dim);
    });
  }
  void attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, int page_size,
                 const ForwardBatch& batch, int nh, int nkv, int hd, Tensor& out) override {
    timed("attention", [&] { inner_->attention(qkv, k_cache, v_cache, page_size, batch, nh, nkv, hd, out); });
  }
  void swiglu(const Tensor& gate_up, Tensor& out) override {
    timed("swiglu", [&] { inner_->swiglu(gate_up, out); });
  }
  void moe(const Tensor& x, const MoeWeights& w, Tensor& out) override {
    timed("moe", [&] { inner_->moe(x, w, out); });
  }
  void all_reduce_sum(Tensor& x, Communicator& comm) override {
    timed("all_reduce_sum", [&] { inner_->all_reduce_sum(x, comm); });
  }
  void gather_block_tokens(const Tensor& blocks, const Tensor& slots, Tensor& ids) override {
    timed("gather_block_tokens", [&] { inner_->gather_block_tokens(blocks, slots, ids); });
  }
  void sample_positions(const Tensor& logits, int64_t first_row, const Tensor& rows, int num_rows,
                        DecodeState& st) override {
    timed("sample_positions", [&] { inner_->sample_positions(logits, first_row, rows, num_rows, st); });
  }
  void commit_step(const Tensor& rows, int num_rows, int64_t num_logits, DecodeState& st) override {
    timed("commit_step", [&] { inner_->commit_step(rows, num_rows, num_logits, st); });
  }
  void sample_vocab_parts(const Tensor& logits, int vocab0, int64_t first_row, const Tensor& rows, int num_rows,
                          DecodeState& st, Tensor& parts, int rank) override {
    timed("sample_vocab_parts",
          [&] { inner_->sample_vocab_parts(logits, vocab0, first_row, rows, num_rows, st, parts, rank); });
  }
  void combine_vocab_parts(const Tensor& parts, int64_t first_row, const Tensor& rows, int num_rows,
                           DecodeState& st) override {
    timed("combine_vocab_parts", [&] { inner_->combine_vocab_parts(parts, first_row, rows, num_rows, st); });
  }
  void place_vocab_columns(const Tensor& logits, int vocab0, Tensor& whole) override {
    timed("place_vocab_columns", [&] { inner_->place_vocab_columns(logits, vocab0, whole); });
  }

 private:
  template <typename F>
  void timed(const char* op, F&& run) {
    const auto start = std::chrono::steady_clock::now();
    run();
    inner_->synchronize();
    (*profile_)[op] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  std::unique_ptr<Backend> inner_;
  std::shared_ptr<OpProfile> profile_;
};

}  // namespace

std::unique_ptr<Backend> make_profiling_backend(std::unique_ptr<Backend> inner, std::shared_ptr<OpProfile> profile) {
  return std::make_unique<ProfilingBackend>(std::move(inner), std::move(profile));
}

}  // namespace jet
