// Getting weights onto the backend, for every family: Model::load / update / release and
// load_model. Tensor names come from weight_map (the one place that knows each family's names);
// projections that run as one GEMM are stacked here (q|k|v, gate|up) and converted to the
// backend's compute dtype. Each checkpoint tensor's place is remembered for in-place updates.
// load_model can also fill the model with random weights (model/random_weights.h) instead.
#include <cstring>
#include <utility>
#include <vector>

#include "model/checkpoint.h"
#include "model/model.h"
#include "model/random_weights.h"
#include "model/weight_map.h"

namespace jet {

namespace {

// Converts one source tensor to `dtype` and copies it to backend memory at `dst`.
class TensorWriter {
 public:
  explicit TensorWriter(Backend& backend) : backend_(backend) {}

  void write(const TensorInfo& t, void* dst) {
    const DType dtype = backend_.compute_dtype();
    const size_t n = static_cast<size_t>(t.numel());
    if (t.dtype == dtype) {  // a bf16 checkpoint on the GPU: no conversion (8 GB for SDAR-4B)
      backend_.upload(dst, t.data, n * dtype_size(dtype));
      return;
    }
    staging_f32_.resize(n);
    convert_to_f32(t.dtype, t.data, staging_f32_.data(), n);
    const void* src = staging_f32_.data();
    if (dtype == DType::BF16) {
      staging_16_.resize(n);
      for (size_t i = 0; i < n; ++i) staging_16_[i] = f32_to_bf16(staging_f32_[i]);
      src = staging_16_.data();
    }
    backend_.upload(dst, src, n * dtype_size(dtype));
  }

 private:
  Backend& backend_;
  std::vector<float> staging_f32_;
  std::vector<uint16_t> staging_16_;
};

// Allocates the model's tensors and fills them from a source, recording each name's slot.
class WeightBuilder {
 public:
  WeightBuilder(Backend& backend, const TensorSource& source, ModelWeights& weights,
                std::map<std::string, WeightSlot>& slots)
      : backend_(backend), source_(source), weights_(weights), slots_(slots), writer_(backend) {}

  // The named tensors stacked along their first dimension, as one backend tensor of `dims`.
  Tensor stacked(const std::vector<std::string>& names, std::initializer_list<int64_t> dims) {
    const DType dtype = backend_.compute_dtype();
    Tensor out = backend_.alloc_tensor(weights_.storage, dtype, dims);
    char* dst = out.ptr<char>();
    for (const std::string& name : names) {
      const TensorInfo* t = source_.find(name);
      JET_ASSERT(t, "tensor ", name, " passed validation but is missing");
      const size_t bytes = static_cast<size_t>(t->numel()) * dtype_size(dtype);
      JET_ASSERT(dst + bytes <= out.ptr<char>() + out.nbytes(), "tensor ", name, " overflows its stack");
      writer_.write(*t, dst);
      slots_[name] = WeightSlot{dst, t->numel()};
      dst += bytes;
    }
    JET_ASSERT(dst == out.ptr<char>() + out.nbytes(), "stacked tensors do not fill their destination");
    return out;
  }

  Tensor single(const std::string& name) {
    const TensorInfo* t = source_.find(name);
    JET_ASSERT(t && t->shape.size() >= 1 && t->shape.size() <= 2, "tensor ", name, " passed validation but is odd");
    if (t->shape.size() == 1) return stacked({name}, {t->shape[0]});
    return stacked({name}, {t->shape[0], t->shape[1]});
  }

 private:
  Backend& backend_;
  const TensorSource& source_;
  ModelWeights& weights_;
  std::map<std::string, WeightSlot>& slots_;
  TensorWriter writer_;
};

LayerWeights build_layer(const ModelConfig& c, int64_t layer, WeightBuilder& b) {
  const LayerWeightNames n = layer_weight_names(c, layer);
  LayerWeights w;
  w.attn_norm = b.single(n.attn_norm);
  w.qkv = b.stacked({n.q_proj, n.k_proj, n.v_proj}, {(c.heads + 2 * c.kv_heads) * c.head_dim, c.hidden});
  if (c.qk_norm) {
    w.q_norm = b.single(n.q_norm);
    w.k_norm = b.single(n.k_norm);
  }
  w.o = b.single(n.o_proj);
  w.mlp_norm = b.single(n.mlp_norm);
  w.is_moe = c.is_moe_layer(layer);
  if (!w.is_moe) {
    w.gate_up = b.stacked({n.gate_proj, n.up_proj}, {2 * c.intermediate, c.hidden});
    w.down = b.single(n.down_proj);
    return w;
  }
  std::vector<std::string> gate_up_names, down_names;
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const ExpertWeightNames en = expert_weight_names(c, layer, e);
    gate_up_names.insert(gate_up_names.end(), {en.gate_proj, en.up_proj});
    down_names.push_back(en.down_proj);
  }
  w.moe.router = b.single(n.router);
  w.moe.gate_up = b.stacked(gate_up_names, {c.num_experts, 2 * c.moe_intermediate, c.hidden});
  w.moe.down = b.stacked(down_names, {c.num_experts, c.hidden, c.moe_intermediate});
  w.moe.top_k = static_cast<int>(c.experts_per_token);
  w.moe.renormalize = c.norm_topk_prob;
  return w;
}

}  // namespace

void Model::load(const TensorSource& source) {
  require_valid_weights(config_, source);
  release();  // free the old weights first: a model rarely fits twice
  ModelWeights w;
  std::map<std::string, WeightSlot> slots;
  WeightBuilder b(backend_, source, w, slots);
  const ModelWeightNames names = model_weight_names(config_);
  w.embed = b.single(names.embed);
  for (int64_t l = 0; l < config_.layers; ++l) w.layers.push_back(build_layer(config_, l, b));
  w.final_norm = b.single(names.final_norm);
  w.lm_head = names.lm_head == names.embed ? w.embed : b.single(names.lm_head);
  weights_ = std::move(w);
  slots_ = std::move(slots);
}

void Model::update(const TensorSource& source) {
  JET_CHECK(has_weights(), "update_weights: the weights were freed; load a whole set first (load_weights, "
            "Python's reload_from_hf_model, or reload_from_path)");
  std::map<std::string, std::vector<int64_t>> expected;
  for (const ExpectedTensor& t : expected_tensors(config_)) expected[t.name] = t.shape;
  // A tied head given under its own name (a state_dict gathered tensor by tensor holds two copies)
  // is the embedding: written there, and when the embedding comes too, it must be the same.
  const ModelWeightNames names = model_weight_names(config_);
  std::vector<std::pair<const TensorInfo*, std::string>> writes;  // tensor, the slot it goes to
  for (const std::string& name : source.names()) {
    const TensorInfo& t = *source.find(name);
    if (!names.tied_alias.empty() && name == names.tied_alias) {
      const TensorInfo* embed = source.find(names.embed);
      JET_CHECK(!embed || (embed->dtype == t.dtype && embed->shape == t.shape && embed->nbytes == t.nbytes &&
                           std::memcmp(embed->data, t.data, t.nbytes) == 0),
                source.description(), ": '", name, "' is this model's tied embedding '", names.embed,
                "', and differs from it: give one of them, or both equal");
      if (!embed) writes.emplace_back(&t, names.embed);
      continue;
    }
    writes.emplace_back(&t, name);
  }
  for (const auto& [tensor, slot] : writes) {
    const std::string& name = tensor->name;
    auto it = expected.find(slot);
    JET_CHECK(it != expected.end(), source.description(), ": '", name, "' is not a weight of this ",
              family_name(config_.family), " model");
    const TensorInfo& t = *tensor;
    JET_CHECK(t.shape == it->second, source.description(), ": tensor '", name, "' has shape ", shape_string(t.shape),
              ", expected ", shape_string(it->second));
    JET_CHECK(t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16, source.description(),
              ": tensor '", name, "' has dtype ", dtype_name(t.dtype), ", expected BF16, F16 or F32");
  }
  TensorWriter writer(backend_);
  for (const auto& [tensor, slot] : writes) writer.write(*tensor, slots_.at(slot).data);
}

void Model::release() {
  weights_ = ModelWeights{};
  slots_.clear();
  scratch_.clear();
}

std::unique_ptr<Model> load_model(const std::string& dir, Backend& backend, bool random_weights) {
  auto model = std::make_unique<Model>(load_model_config(dir), backend);
  if (random_weights) {
    model->load(RandomWeights(model->config(), 0));
  } else {
    model->load(Checkpoint(dir));
  }
  return model;
}

}  // namespace jet
