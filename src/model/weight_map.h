// The HuggingFace tensor names and shapes a model expects, and the check of a checkpoint
// against them. The names come from the family's architecture (model/architecture.h); the model
// code fetches its weights through the *_weight_names helpers rather than spelling names itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/model_config.h"

namespace jet {

// Tensors outside the layers. lm_head equals embed when the config ties them.
struct ModelWeightNames {
  std::string embed;       // [vocab, hidden]
  std::string final_norm;  // [hidden]
  std::string lm_head;     // [vocab, hidden]
  // A tied model's state_dict also lists its embedding under the untied head's name; empty when
  // the config does not tie them.
  std::string tied_alias;
};

// Tensors of one layer. An empty name means the family or this layer has no such tensor.
// Shapes are [out, in]; q = heads * head_dim, kv = kv_heads * head_dim, inter = intermediate.
struct LayerWeightNames {
  std::string attn_norm;                            // [hidden], RMSNorm before attention
  std::string q_proj, k_proj, v_proj;               // [q, hidden], [kv, hidden], [kv, hidden]; or q_proj alone,
                                                    // fused: [q + 2 kv, hidden] (LLaDA2)
  std::string q_bias, k_bias, v_bias;               // [q], [kv], [kv] (Qwen2 families)
  std::string o_proj;                               // [hidden, q]
  std::string q_norm, k_norm;                       // [head_dim], per-head qk-norm (SDAR families)
  std::string mlp_norm;                             // [hidden], RMSNorm before the MLP
  std::string gate_proj, up_proj, down_proj;        // dense SwiGLU MLP: [inter, hidden] x2, [hidden, inter]
  std::string router;                               // [experts, hidden] (MoE layers)
  std::string router_bias;                          // [experts], fp32 (LLaDA2's MoE layers)
  std::string shared_gate, shared_up, shared_down;  // [shared, hidden] x2, [hidden, shared]
};

// One routed expert of a MoE layer: [moe_inter, hidden] x2, [hidden, moe_inter].
struct ExpertWeightNames {
  std::string gate_proj, up_proj, down_proj;
};

ModelWeightNames model_weight_names(const ModelConfig& config);
LayerWeightNames layer_weight_names(const ModelConfig& config, int64_t layer);
ExpertWeightNames expert_weight_names(const ModelConfig& config, int64_t layer, int64_t expert);

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  bool projection = false;  // a linear layer's weight, which an FP8 checkpoint may hold as e4m3

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// Every tensor the model reads, with its shape, in checkpoint order (embedding, layers, head).
// The scale tensors of FP8 projections (fp8_weights.h) come on top.
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

// The projections that run as one product, each list stacked in order into one Linear:
// q|k|v, o, gate|up, down per layer; a MoE layer's experts' gate|up pairs, then their downs.
std::vector<std::vector<std::string>> projection_stacks(const ModelConfig& config);

struct WeightReport {
  std::vector<std::string> problems;    // missing tensors, wrong shapes, dtypes or FP8 scales
  std::vector<std::string> unexpected;  // names in the checkpoint the model does not read (not an error)
  bool ok() const { return problems.empty(); }
};

WeightReport validate_weights(const ModelConfig& config, const TensorSource& source);

// validate_weights, throwing one jet::Error that lists the problems when there are any.
void require_valid_weights(const ModelConfig& config, const TensorSource& source);

// "[151936, 2560]"
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace jet
