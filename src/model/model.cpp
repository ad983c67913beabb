// The shared transformer forward (pre-norm, fused residual + RMSNorm, SwiGLU or MoE MLP;
// projections in the compute dtype or FP8).
#include "model/model.h"

namespace jet {

Model::Model(ModelConfig config, Backend& backend, bool quantize_fp8, Communicator* comm, int ranks_per_memory,
             bool expert_parallel)
    : config_(std::move(config)),
      backend_(backend),
      quantize_fp8_(quantize_fp8),
      comm_(comm),
      shard_(make_shard(config_, comm ? comm->rank() : 0, comm ? comm->size() : 1, expert_parallel,
                        backend_.supports_vocab_parts())) {
  shard_.ranks_per_memory = ranks_per_memory;
}

size_t Model::weight_bytes() const {
  size_t bytes = 0;
  for (const Buffer& b : weights_.storage) bytes += b.bytes();
  return bytes;
}

size_t Model::activation_bytes(int64_t tokens) const {
  const ModelConfig& c = config_;
  const int64_t q_width = shard_.heads * c.head_dim;
  const int64_t qkv_width = q_width + 2 * shard_.kv_heads * c.head_dim;
  const bool dense = shard_.intermediate > 0;
  // Scratch 0-4 hold every token, 5-6 every token of a dense MLP, 7-10 the last layer's logits
  // rows (at most every token); grow_view allocates a quarter more than asked.
  const int64_t per_token =
      3 * c.hidden + qkv_width + q_width + (dense ? 3 * shard_.intermediate : 0) + q_width + 3 * c.hidden;
  const size_t bytes = static_cast<size_t>(tokens * per_token) * dtype_size(backend_.compute_dtype());
  return bytes + bytes / 4;
}

bool Model::fp8_projections() const { return !weights_.layers.empty() && weights_.layers.front().qkv.fp8(); }

Tensor Model::scratch(int slot, DType dtype, std::initializer_list<int64_t> dims) {
  if (static_cast<int>(scratch_.size()) <= slot) scratch_.resize(slot + 1);
  return backend_.grow_view(scratch_[slot], dtype, dims);
}

void Model::project(const Tensor& x, const Linear& w, Tensor& out) {
  if (w.fp8()) {
    backend_.matmul_fp8(x, w, out);
  } else {
    backend_.matmul(x, w.weight, out);
  }
}

void Model::reduce(Tensor& partial) {
  if (comm_ && comm_->size() > 1) backend_.all_reduce_sum(partial, *comm_);
}

void Model::forward(const ForwardBatch& batch, const Tensor& ids, KvCache& kv, Tensor* logits,
                    const Tensor* logit_rows) {
  const Tensor hidden = forward_hidden(batch, ids, kv, logits ? logits->dim(0) : 0, logit_rows);
  if (logits) lm_head(hidden, *logits);
}

void Model::lm_head(const Tensor& hidden, Tensor& logits) { backend_.matmul(hidden, weights_.lm_head, logits); }

Tensor Model::forward_hidden(const ForwardBatch& batch, const Tensor& ids, KvCache& kv, int64_t num_rows,
                             const Tensor* logit_rows) {
  JET_CHECK(has_weights(),
            "the model's weights were freed (offload_parameters / free_all_resources); "
            "load them again (load_weights / reload_from_path) before generating");
  const ModelConfig& c = config_;
  const int64_t T = batch.host.num_tokens;
  const DType act = backend_.compute_dtype();
  const int nh = static_cast<int>(shard_.heads), nkv = static_cast<int>(shard_.kv_heads);
  const int64_t q_width = int64_t{nh} * c.head_dim;
  const int64_t qkv_width = q_width + 2 * int64_t{nkv} * c.head_dim;
  const float eps = static_cast<float>(c.rms_eps);

  Tensor resid = scratch(0, act, {T, c.hidden});
  Tensor normed = scratch(1, act, {T, c.hidden});
  Tensor delta = scratch(2, act, {T, c.hidden});
  Tensor qkv = scratch(3, act, {T, qkv_width});
  Tensor attn = scratch(4, act, {T, q_width});

  backend_.embedding(ids, weights_.embed, resid);
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    const LayerWeights& w = weights_.layers[l];
    const bool last = l + 1 == weights_.layers.size();
    if (l == 0) {
      backend_.rmsnorm(resid, w.attn_norm, eps, normed);
    } else {
      backend_.add_rmsnorm(resid, delta, w.attn_norm, eps, normed);
    }
    project(normed, w.qkv, qkv);
    backend_.qk_norm_rope(qkv, w.qkv_bias, w.q_norm, w.k_norm, eps, batch, static_cast<float>(c.rope_theta), nh, nkv,
                          c.head_dim, kv.k[l], kv.v[l], kv.page_size, static_cast<int>(c.rotary_dim));
    // Past the last layer's K/V the cache needs nothing more, and the LM head only the rows whose
    // logits are asked for: the last layer's attention output, MLP and final norm run on those
    // rows alone, and a forward without logits (prefill, saving a block) ends here.
    if (last && num_rows == 0) return {};
    backend_.attention(qkv, kv.k[l], kv.v[l], kv.page_size, batch, nh, nkv, c.head_dim, attn);
    const int64_t rows = last ? num_rows : T;
    Tensor attn_rows, resid_rows, delta_rows, normed_rows;
    if (last && logit_rows) {  // the embedding op is a row gather; here its tables are activations
      attn_rows = scratch(7, act, {rows, q_width});
      resid_rows = scratch(8, act, {rows, c.hidden});
      delta_rows = scratch(9, act, {rows, c.hidden});
      normed_rows = scratch(10, act, {rows, c.hidden});
      backend_.embedding(*logit_rows, attn, attn_rows);
      backend_.embedding(*logit_rows, resid, resid_rows);
    } else {
      attn_rows = attn.rows(0, rows);
      resid_rows = resid.rows(0, rows);
      delta_rows = delta.rows(0, rows);
      normed_rows = normed.rows(0, rows);
    }
    project(attn_rows, w.o, delta_rows);
    reduce(delta_rows);
    backend_.add_rmsnorm(resid_rows, delta_rows, w.mlp_norm, eps, normed_rows);
    if (w.is_moe) {
      backend_.moe(normed_rows, w.moe, delta_rows);
    } else {
      const int64_t inter = w.down.weight.dim(1);
      Tensor gate_up = scratch(5, act, {rows, 2 * inter});
      Tensor hidden = scratch(6, act, {rows, inter});
      project(normed_rows, w.gate_up, gate_up);
      backend_.swiglu(gate_up, hidden);
      project(hidden, w.down, delta_rows);
    }
    reduce(delta_rows);
    if (last) {
      backend_.add_rmsnorm(resid_rows, delta_rows, weights_.final_norm, eps, normed_rows);
      return normed_rows;
    }
  }
  return {};
}

}  // namespace jet
