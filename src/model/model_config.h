// ModelConfig: the typed, validated architecture of a checkpoint, read from config.json (and the
// stop tokens from generation_config.json). One struct for every family; each family's
// architecture (src/model/arch/) maps its own keys (SDAR: Qwen3 names, LLaDA: OLMo names, Fast-dLLM
// v2 and Dream: Qwen2 names) onto it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jet {

enum class ModelFamily { SDAR, SDAR_MOE, LLADA, FAST_DLLM_V2, DREAM, LLADA2_MOE, EFFICIENT_DLM };

// config.json's model_type of the family: "sdar", "sdar_moe", "llada", "Fast_dLLM_Qwen", "Dream",
// "llada2_moe"; for a family whose model_type is its base model's, its architectures entry
// ("EfficientDLM").
std::string_view family_name(ModelFamily family);

struct ModelConfig {
  ModelFamily family = ModelFamily::SDAR;
  std::string model_type;  // as written in config.json (dLLM-Var is a "llada" checkpoint)

  int64_t hidden = 0;        // residual width
  int64_t intermediate = 0;  // dense MLP width
  int64_t layers = 0;
  int64_t heads = 0;     // query heads
  int64_t kv_heads = 0;  // key/value heads (GQA when fewer than heads)
  int64_t head_dim = 0;
  int64_t vocab = 0;  // rows of the embedding and of the LM head
  double rms_eps = 0;
  double rope_theta = 0;
  int64_t max_positions = 0;
  bool tied = false;         // the LM head reuses the embedding
  bool qk_norm = false;      // per-head RMSNorm of q and k before RoPE (SDAR)
  bool block_causal = true;  // SDAR: block-causal attention; LLaDA: bidirectional
  bool qkv_bias = false;     // q, k and v projections add a bias (Qwen2: Fast-dLLM v2, Dream)
  // The logits of position p come from the hidden state of p - 1 (Fast-dLLM v2, Dream): the
  // decode's head steps and row shift, docs/decoding.md §1 "Shifted logits".
  bool shifted_logits = false;

  int64_t block_size = 0;  // default denoising block length
  // The block length the model was trained with, where known: SDAR's (its config, else the
  // family's 4); LLaDA's only where the config states one (LLaDA trains on whole responses).
  std::optional<int64_t> trained_block_size;
  std::string block_size_source;  // where block_size came from, for the start-up line and `inspect`
  int64_t mask_token_id = 0;
  std::vector<int64_t> eos_token_ids;  // stop tokens
  std::optional<int64_t> bos_token_id;

  // An FP8 checkpoint: config.json's quantization_config says quant_method "fp8" (e4m3, scales
  // per tensor or in 128x128 blocks) or "modelopt" with quant_algo "FP8". Its projections may
  // then be e4m3 tensors with scale tensors beside them (model/fp8_weights.h).
  bool fp8_checkpoint = false;

  int64_t rotary_dim = 0;  // RoPE rotates the first rotary_dim dimensions of a head (LLaDA2: half); 0: all

  // Mixture of experts (SDAR_MOE, LLADA2_MOE); zero / empty otherwise.
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;  // top-k
  int64_t moe_intermediate = 0;   // width of one expert's MLP
  bool norm_topk_prob = false;    // renormalise the top-k router weights to sum 1
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;  // layers that keep a dense MLP
  // LLaDA2's router (backend.h, MoeRouting): sigmoid scores, an fp32 expert bias for the choice,
  // group-limited top-k, a scaling of the weights; and a shared expert of this width (0: none).
  bool sigmoid_router = false;
  bool router_bias = false;
  int64_t n_group = 1, topk_group = 1;
  double routed_scaling = 1.0;
  int64_t shared_expert_intermediate = 0;

  // Whether `layer` has a routed-expert MLP (Qwen3-MoE rule: not in mlp_only_layers, and
  // (layer + 1) is a multiple of decoder_sparse_step).
  bool is_moe_layer(int64_t layer) const;
};

// Reads <model_dir>/config.json and, when present, <model_dir>/generation_config.json.
// Throws jet::Error naming the file and key for a missing or mistyped key, an unknown
// model_type, an unsupported feature (e.g. attention biases, rope scaling) or inconsistent sizes.
ModelConfig load_model_config(const std::string& model_dir);

}  // namespace jet
