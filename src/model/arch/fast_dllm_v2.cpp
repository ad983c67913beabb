// Fast-dLLM v2 (NVlabs): Qwen2.5 turned into a block diffusion model, model_type
// "Fast_dLLM_Qwen" / Fast_dLLM_QwenForCausalLM. The Qwen2 network (biases on q, k and v; no q/k
// norm), block-causal attention like SDAR, and shifted logits: position p is predicted by the
// hidden state of p - 1 (docs/decoding.md §1). Keys: the Qwen2 ones read here, which Dream
// shares (hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads (= heads when absent or null), vocab_size, rms_norm_eps, rope_theta,
// max_position_embeddings, tie_word_embeddings), head_dim (hidden / heads when absent),
// bd_size (the block size, 32 when absent), mask_token_id (151665 when absent: the published
// configs leave it to the generation code).
#include "core/error.h"
#include "model/arch/families.h"

namespace jet {

namespace {

constexpr int64_t kBlockSize = 32;
constexpr int64_t kMaskId = 151665;

void read(const JsonObject& config, ModelConfig& c) {
  read_qwen2_keys(config, c);
  c.head_dim = positive_int(config, "head_dim", c.head_dim);
  c.block_causal = true;
  c.block_size = positive_int(config, "bd_size", kBlockSize);
  c.trained_block_size = c.block_size;
  c.mask_token_id = config.get_int("mask_token_id", kMaskId);
}

}  // namespace

const NamingScheme& qwen2_names() {
  static const NamingScheme names = [] {
    NamingScheme n = qwen3_names();
    n.q_bias = "self_attn.q_proj.bias";
    n.k_bias = "self_attn.k_proj.bias";
    n.v_bias = "self_attn.v_proj.bias";
    n.q_norm = nullptr;
    n.k_norm = nullptr;
    n.router = nullptr;
    n.experts_infix = nullptr;
    return n;
  }();
  return names;
}

const std::vector<FixedKey>& qwen2_fixed_keys() {
  static const std::vector<FixedKey> keys = {
      {"rope_scaling", {nullptr, {{"rope_type", "default"}}, {{"type", "default"}}}},
      {"use_sliding_window", {false}},
      {"hidden_act", {"silu"}}};
  return keys;
}

void read_qwen2_keys(const JsonObject& config, ModelConfig& c) {
  c.hidden = positive_int(config, "hidden_size");
  c.intermediate = positive_int(config, "intermediate_size");
  c.layers = positive_int(config, "num_hidden_layers");
  c.heads = positive_int(config, "num_attention_heads");
  c.kv_heads = positive_int(config, "num_key_value_heads", c.heads);  // JsonObject::has reads null as absent
  JET_CHECK(c.hidden % c.heads == 0, config.source(), ": hidden_size ", c.hidden,
            " is not a multiple of num_attention_heads ", c.heads);
  c.head_dim = c.hidden / c.heads;
  c.vocab = positive_int(config, "vocab_size");
  c.rms_eps = positive_number(config, "rms_norm_eps");
  c.rope_theta = positive_number(config, "rope_theta");
  c.max_positions = positive_int(config, "max_position_embeddings");
  c.tied = config.get_bool("tie_word_embeddings", false);
  c.qk_norm = false;
  c.qkv_bias = true;
  c.shifted_logits = true;
}

const Architecture& fast_dllm_v2_architecture() {
  static const Architecture fast_dllm_v2 = {
      .model_type = "Fast_dLLM_Qwen",
      .hf_architecture = "Fast_dLLM_QwenForCausalLM",
      .family = ModelFamily::FAST_DLLM_V2,
      .read = read,
      .fixed_keys = qwen2_fixed_keys(),
      .names = qwen2_names(),
      .default_eos_ids = {151645, 151643},
  };
  return fast_dllm_v2;
}

}  // namespace jet
