// LLaDA2.0 / 2.1 (inclusionAI; mini 16B-A1.4B, flash 100B-A6.1B): the Ling-2.0 (BailingMoeV2)
// MoE network with SDAR's block-causal attention and no logit shift, model_type "llada2_moe" /
// LLaDA2MoeModelLM. q, k and v in one fused query_key_value tensor; per-head q/k RMSNorm; RoPE on
// the first partial_rotary_factor of each head; a sigmoid router whose fp32 expert bias steers the
// choice only, top-k within the topk_group best of n_group expert groups, the weights renormalised
// and scaled by routed_scaling_factor; a shared expert; the first first_k_dense_replace layers
// dense. Keys: hidden_size, intermediate_size (the dense layers' MLP), num_hidden_layers,
// num_attention_heads, num_key_value_heads (= heads when absent or null), head_dim (hidden /
// heads when absent), vocab_size, rms_norm_eps, rope_theta, max_position_embeddings,
// tie_word_embeddings, partial_rotary_factor (1 when absent; a rotary_dim key must agree),
// use_qk_norm (true), num_experts, num_experts_per_tok, moe_intermediate_size,
// num_shared_experts (0 or null: none), first_k_dense_replace (0), n_group and topk_group (1),
// routed_scaling_factor (1), moe_router_enable_expert_bias (true), block_size (32),
// mask_token_id (156895). LLaDA2.2's expert_capacity (block routing) is refused.
#include <cmath>

#include "core/error.h"
#include "model/arch/families.h"

namespace jet {

namespace {

constexpr int64_t kBlockSize = 32;
constexpr int64_t kMaskId = 156895;

void read(const JsonObject& config, ModelConfig& c) {
  const std::string& file = config.source();
  // LLaDA2.2 routes per 32-token block (at most expert_capacity experts a block): read as 2.0 it
  // would route every token on its own, silently otherwise than it was trained.
  JET_CHECK(!config.has("expert_capacity"), file, ": expert_capacity is set: LLaDA2.2's block routing is not ",
            "supported yet (LLaDA2.0 and 2.1 are)");
  c.hidden = positive_int(config, "hidden_size");
  c.intermediate = positive_int(config, "intermediate_size");
  c.layers = positive_int(config, "num_hidden_layers");
  c.heads = positive_int(config, "num_attention_heads");
  c.kv_heads = positive_int(config, "num_key_value_heads", c.heads);  // JsonObject::has reads null as absent
  c.head_dim = config.has("head_dim") ? positive_int(config, "head_dim") : c.hidden / c.heads;
  c.vocab = positive_int(config, "vocab_size");
  c.rms_eps = positive_number(config, "rms_norm_eps");
  c.rope_theta = positive_number(config, "rope_theta");
  c.max_positions = positive_int(config, "max_position_embeddings");
  c.tied = config.get_bool("tie_word_embeddings", false);
  c.qk_norm = config.get_bool("use_qk_norm", true);
  c.block_causal = true;

  const double factor = config.has("partial_rotary_factor") ? positive_number(config, "partial_rotary_factor") : 1.0;
  const auto rotary = static_cast<int64_t>(static_cast<double>(c.head_dim) * factor);
  JET_CHECK(factor <= 1 && rotary >= 2 && rotary % 2 == 0, file, ": partial_rotary_factor ", factor,
            " gives a rotary dimension of ", rotary, " of head_dim ", c.head_dim, "; it must be even and at least 2");
  if (config.has("rotary_dim")) {
    JET_CHECK(config.get_int("rotary_dim") == rotary, file, ": rotary_dim ", config.get_int("rotary_dim"),
              " differs from head_dim ", c.head_dim, " x partial_rotary_factor ", factor, " = ", rotary);
  }
  c.rotary_dim = rotary == c.head_dim ? 0 : rotary;

  c.num_experts = positive_int(config, "num_experts");
  c.experts_per_token = positive_int(config, "num_experts_per_tok");
  c.moe_intermediate = positive_int(config, "moe_intermediate_size");
  const int64_t shared = config.get_int("num_shared_experts", 0);
  JET_CHECK(shared >= 0, file, ": key 'num_shared_experts' must be >= 0, got ", shared);
  c.shared_expert_intermediate = shared * c.moe_intermediate;
  const int64_t dense = config.get_int("first_k_dense_replace", 0);
  JET_CHECK(dense >= 0 && dense <= c.layers, file, ": first_k_dense_replace ", dense, " is not in [0, ", c.layers,
            " layers]");
  for (int64_t l = 0; l < dense; ++l) c.mlp_only_layers.push_back(l);
  c.sigmoid_router = true;
  c.router_bias = config.get_bool("moe_router_enable_expert_bias", true);
  c.n_group = positive_int(config, "n_group", 1);
  c.topk_group = positive_int(config, "topk_group", 1);
  JET_CHECK(c.num_experts % c.n_group == 0, file, ": num_experts ", c.num_experts, " is not a multiple of n_group ",
            c.n_group);
  JET_CHECK(c.topk_group <= c.n_group, file, ": topk_group ", c.topk_group, " exceeds n_group ", c.n_group);
  JET_CHECK(c.experts_per_token <= c.num_experts / c.n_group * c.topk_group, file, ": num_experts_per_tok ",
            c.experts_per_token, " exceeds the ", c.num_experts / c.n_group * c.topk_group,
            " experts of the topk_group groups");
  c.routed_scaling = config.has("routed_scaling_factor") ? positive_number(config, "routed_scaling_factor") : 1.0;
  // The reference code renormalises whenever it picks more than one expert.
  c.norm_topk_prob = c.experts_per_token > 1;

  c.block_size = positive_int(config, "block_size", kBlockSize);
  c.trained_block_size = c.block_size;
  c.mask_token_id = config.get_int("mask_token_id", kMaskId);
}

}  // namespace

const Architecture& llada2_moe_architecture() {
  static const Architecture llada2 = {
      .model_type = "llada2_moe",
      .hf_architecture = "LLaDA2MoeModelLM",
      .family = ModelFamily::LLADA2_MOE,
      .read = read,
      .fixed_keys = {{"score_function", {"sigmoid"}},
                     {"use_qkv_bias", {false}},
                     {"use_bias", {false}},
                     {"hidden_act", {"silu"}},
                     {"rope_scaling", {nullptr, {{"rope_type", "default"}}, {{"type", "default"}}}},
                     {"using_split_qkv_in_self_attention", {false}},
                     {"norm_topk_prob", {true}}},
      .names = {.embed = "model.word_embeddings.weight",
                .final_norm = "model.norm.weight",
                .lm_head = "lm_head.weight",
                .layer_prefix = "model.layers.",
                .attn_norm = "input_layernorm.weight",
                .q_proj = "attention.query_key_value.weight",
                .o_proj = "attention.dense.weight",
                .q_norm = "attention.query_layernorm.weight",
                .k_norm = "attention.key_layernorm.weight",
                .mlp_norm = "post_attention_layernorm.weight",
                .gate_proj = "mlp.gate_proj.weight",
                .up_proj = "mlp.up_proj.weight",
                .down_proj = "mlp.down_proj.weight",
                .router = "mlp.gate.weight",
                .router_bias = "mlp.gate.expert_bias",
                .experts_infix = "mlp.experts.",
                .shared_experts_infix = "mlp.shared_experts."},
      .default_eos_ids = {156892},
  };
  return llada2;
}

}  // namespace jet
