// The shared transformer forward (pre-norm, fused residual + RMSNorm, SwiGLU or MoE MLP).
#include "model/model.h"

namespace jet {

Model::Model(ModelConfig config, Backend& backend) : config_(std::move(config)), backend_(backend) {}

Tensor Model::scratch(int slot, DType dtype, std::initializer_list<int64_t> dims) {
  if (static_cast<int>(scratch_.size()) <= slot) scratch_.resize(slot + 1);
  return backend_.grow_view(scratch_[slot], dtype, dims);
}

void Model::forward(const ForwardBatch& batch, const Tensor& ids, KvCache& kv, Tensor* logits,
                    const Tensor* logit_rows) {
  JET_CHECK(has_weights(), "the model's weights were freed (offload_parameters / free_all_resources); "
            "load them again (load_weights / reload_from_path) before generating");
  const ModelConfig& c = config_;
  const int64_t T = batch.host.num_tokens;
  const DType act = backend_.compute_dtype();
  const int64_t q_width = int64_t{c.heads} * c.head_dim;
  const int64_t qkv_width = q_width + 2 * int64_t{c.kv_heads} * c.head_dim;
  const float eps = static_cast<float>(c.rms_eps);

  Tensor resid = scratch(0, act, {T, c.hidden});
  Tensor normed = scratch(1, act, {T, c.hidden});
  Tensor delta = scratch(2, act, {T, c.hidden});
  Tensor qkv = scratch(3, act, {T, qkv_width});
  Tensor attn = scratch(4, act, {T, q_width});

  backend_.embedding(ids, weights_.embed, resid);
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    const LayerWeights& w = weights_.layers[l];
    if (l == 0) {
      backend_.rmsnorm(resid, w.attn_norm, eps, normed);
    } else {
      backend_.add_rmsnorm(resid, delta, w.attn_norm, eps, normed);
    }
    backend_.matmul(normed, w.qkv, qkv);
    backend_.qk_norm_rope(qkv, w.q_norm, w.k_norm, eps, batch, static_cast<float>(c.rope_theta), c.heads,
                          c.kv_heads, c.head_dim, kv.k[l], kv.v[l], kv.page_size);
    backend_.attention(qkv, kv.k[l], kv.v[l], kv.page_size, batch, c.heads, c.kv_heads, c.head_dim, attn);
    backend_.matmul(attn, w.o, delta);
    backend_.add_rmsnorm(resid, delta, w.mlp_norm, eps, normed);
    if (w.is_moe) {
      backend_.moe(normed, w.moe, delta);
    } else {
      const int64_t inter = w.down.dim(1);
      Tensor gate_up = scratch(5, act, {T, 2 * inter});
      Tensor hidden = scratch(6, act, {T, inter});
      backend_.matmul(normed, w.gate_up, gate_up);
      backend_.swiglu(gate_up, hidden);
      backend_.matmul(hidden, w.down, delta);
    }
  }
  if (!logits) return;
  backend_.add_rmsnorm(resid, delta, weights_.final_norm, eps, normed);
  if (!logit_rows) {
    backend_.matmul(normed.rows(0, logits->dim(0)), weights_.lm_head, *logits);
    return;
  }
  // The embedding op is a row gather; here its table is the normed activations.
  Tensor picked = scratch(7, act, {logits->dim(0), c.hidden});
  backend_.embedding(*logit_rows, normed, picked);
  backend_.matmul(picked, weights_.lm_head, *logits);
}

}  // namespace jet
