// load_model: config + checkpoint -> weights on the backend, for every family. Tensor names come
// from weight_map (the one place that knows each family's names); projections that run as one
// GEMM are stacked here (q|k|v, gate|up) and converted to the backend's compute dtype.
#include <vector>

#include "model/checkpoint.h"
#include "model/model.h"
#include "model/weight_map.h"

namespace jet {

namespace {

class WeightUploader {
 public:
  WeightUploader(Backend& backend, const Checkpoint& checkpoint, std::vector<Buffer>& storage)
      : backend_(backend), checkpoint_(checkpoint), storage_(storage) {}

  // The named tensors stacked along their first dimension, as one backend tensor of `dims`.
  Tensor stacked(const std::vector<std::string>& names, std::initializer_list<int64_t> dims) {
    const DType dtype = backend_.compute_dtype();
    Tensor out = backend_.alloc_tensor(storage_, dtype, dims);
    char* dst = out.ptr<char>();
    for (const std::string& name : names) {
      const TensorInfo& t = checkpoint_.get(name);
      const size_t n = static_cast<size_t>(t.numel());
      staging_f32_.resize(n);
      convert_to_f32(t.dtype, t.data, staging_f32_.data(), n);
      const void* src = staging_f32_.data();
      if (dtype == DType::BF16) {
        staging_16_.resize(n);
        for (size_t i = 0; i < n; ++i) staging_16_[i] = f32_to_bf16(staging_f32_[i]);
        src = staging_16_.data();
      }
      const size_t bytes = n * dtype_size(dtype);
      JET_ASSERT(dst + bytes <= out.ptr<char>() + out.nbytes(), "tensor ", name, " overflows its stack");
      backend_.upload(dst, src, bytes);
      dst += bytes;
    }
    JET_ASSERT(dst == out.ptr<char>() + out.nbytes(), "stacked tensors do not fill their destination");
    return out;
  }

  Tensor single(const std::string& name) {
    const TensorInfo& t = checkpoint_.get(name);
    JET_ASSERT(t.shape.size() >= 1 && t.shape.size() <= 2);
    if (t.shape.size() == 1) return stacked({name}, {t.shape[0]});
    return stacked({name}, {t.shape[0], t.shape[1]});
  }

 private:
  Backend& backend_;
  const Checkpoint& checkpoint_;
  std::vector<Buffer>& storage_;
  std::vector<float> staging_f32_;
  std::vector<uint16_t> staging_16_;
};

LayerWeights load_layer(const ModelConfig& c, int64_t layer, WeightUploader& up) {
  const LayerWeightNames n = layer_weight_names(c, layer);
  LayerWeights w;
  w.attn_norm = up.single(n.attn_norm);
  w.qkv = up.stacked({n.q_proj, n.k_proj, n.v_proj}, {(c.heads + 2 * c.kv_heads) * c.head_dim, c.hidden});
  if (c.qk_norm) {
    w.q_norm = up.single(n.q_norm);
    w.k_norm = up.single(n.k_norm);
  }
  w.o = up.single(n.o_proj);
  w.mlp_norm = up.single(n.mlp_norm);
  w.is_moe = c.is_moe_layer(layer);
  if (!w.is_moe) {
    w.gate_up = up.stacked({n.gate_proj, n.up_proj}, {2 * c.intermediate, c.hidden});
    w.down = up.single(n.down_proj);
    return w;
  }
  std::vector<std::string> gate_up_names, down_names;
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const ExpertWeightNames en = expert_weight_names(c, layer, e);
    gate_up_names.insert(gate_up_names.end(), {en.gate_proj, en.up_proj});
    down_names.push_back(en.down_proj);
  }
  w.moe.router = up.single(n.router);
  w.moe.gate_up = up.stacked(gate_up_names, {c.num_experts, 2 * c.moe_intermediate, c.hidden});
  w.moe.down = up.stacked(down_names, {c.num_experts, c.hidden, c.moe_intermediate});
  w.moe.top_k = static_cast<int>(c.experts_per_token);
  w.moe.renormalize = c.norm_topk_prob;
  return w;
}

}  // namespace

std::unique_ptr<Model> load_model(const std::string& dir, Backend& backend) {
  ModelConfig config = load_model_config(dir);
  Checkpoint checkpoint(dir);
  require_valid_weights(config, checkpoint);

  ModelWeights w;
  WeightUploader up(backend, checkpoint, w.storage);
  const ModelWeightNames names = model_weight_names(config);
  w.embed = up.single(names.embed);
  for (int64_t l = 0; l < config.layers; ++l) w.layers.push_back(load_layer(config, l, up));
  w.final_norm = up.single(names.final_norm);
  w.lm_head = names.lm_head == names.embed ? w.embed : up.single(names.lm_head);
  return std::make_unique<Model>(std::move(config), std::move(w), backend);
}

}  // namespace jet
