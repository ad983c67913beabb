// SDAR (JetAstra; TraceRL's TraDo has the same architecture): the Qwen3 network with
// block-causal attention and per-head q/k RMSNorm, model_type "sdar" / SDARForCausalLM.
// reference/models.md §1. Keys: hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim (Qwen3's 128 when absent), vocab_size,
// rms_norm_eps, rope_theta, max_position_embeddings, tie_word_embeddings, block_size (4 when
// absent, as on SDAR-4B-Chat's HF config), mask_token_id (151669 when absent).
#include "model/arch/families.h"

namespace jet {

namespace {

constexpr int64_t kBlockSize = 4;
constexpr int64_t kMaskId = 151669;
constexpr int64_t kQwen3HeadDim = 128;  // Qwen3Config's head_dim (not hidden / heads: SDAR-4B's q is wider)

}  // namespace

const NamingScheme& qwen3_names() {
  static const NamingScheme names = {
      .embed = "model.embed_tokens.weight",
      .final_norm = "model.norm.weight",
      .lm_head = "lm_head.weight",
      .layer_prefix = "model.layers.",
      .attn_norm = "input_layernorm.weight",
      .q_proj = "self_attn.q_proj.weight",
      .k_proj = "self_attn.k_proj.weight",
      .v_proj = "self_attn.v_proj.weight",
      .o_proj = "self_attn.o_proj.weight",
      .q_norm = "self_attn.q_norm.weight",
      .k_norm = "self_attn.k_norm.weight",
      .mlp_norm = "post_attention_layernorm.weight",
      .gate_proj = "mlp.gate_proj.weight",
      .up_proj = "mlp.up_proj.weight",
      .down_proj = "mlp.down_proj.weight",
      .router = "mlp.gate.weight",
      .experts_infix = "mlp.experts.",
  };
  return names;
}

const std::vector<FixedKey>& qwen3_fixed_keys() {
  static const std::vector<FixedKey> keys = {
      {"attention_bias", {false}},
      // HF writes "no scaling" either as null or as the default rope type.
      {"rope_scaling", {nullptr, {{"rope_type", "default"}}, {{"type", "default"}}}},
      {"use_sliding_window", {false}},
      {"hidden_act", {"silu"}}};
  return keys;
}

void read_qwen3_keys(const JsonObject& config, ModelConfig& c) {
  c.hidden = positive_int(config, "hidden_size");
  c.intermediate = positive_int(config, "intermediate_size");
  c.layers = positive_int(config, "num_hidden_layers");
  c.heads = positive_int(config, "num_attention_heads");
  c.kv_heads = positive_int(config, "num_key_value_heads");
  c.head_dim = positive_int(config, "head_dim", kQwen3HeadDim);
  c.vocab = positive_int(config, "vocab_size");
  c.rms_eps = positive_number(config, "rms_norm_eps");
  c.rope_theta = positive_number(config, "rope_theta");
  c.max_positions = positive_int(config, "max_position_embeddings");
  c.tied = config.get_bool("tie_word_embeddings", false);
  c.qk_norm = true;
  c.block_causal = true;
  c.block_size = positive_int(config, "block_size", kBlockSize);
  c.trained_block_size = c.block_size;
  c.mask_token_id = config.get_int("mask_token_id", kMaskId);
}

const Architecture& sdar_architecture() {
  static const Architecture sdar = {
      .model_type = "sdar",
      .hf_architecture = "SDARForCausalLM",
      .family = ModelFamily::SDAR,
      .read = read_qwen3_keys,
      .fixed_keys = qwen3_fixed_keys(),
      .names = qwen3_names(),
      .default_eos_ids = {151645, 151643},
      .block_size_from_name = true,
  };
  return sdar;
}

}  // namespace jet
