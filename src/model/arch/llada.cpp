// LLaDA (and dLLM-Var, a "llada" checkpoint): the OLMo-style network with bidirectional
// attention and no q/k norm, model_type "llada" / LLaDAModelLM. reference/models.md §2. Keys:
// d_model, mlp_hidden_size, n_layers, n_heads, n_kv_heads (= n_heads when absent or null),
// embedding_size (else vocab_size: the embedding's possibly padded rows), rms_norm_eps,
// rope_theta, max_sequence_length, weight_tying, block_size (a default of 32 only: LLaDA trains on
// whole responses, so only a stated one is its trained block size), mask_token_id (126336).
// head_dim is implicit: d_model / n_heads.
#include "core/error.h"
#include "model/arch/families.h"

namespace jet {

namespace {

constexpr int64_t kBlockSize = 32;  // the LLaDA demo's block length, a default only
constexpr int64_t kMaskId = 126336;

void read(const JsonObject& config, ModelConfig& c) {
  c.hidden = positive_int(config, "d_model");
  c.intermediate = positive_int(config, "mlp_hidden_size");
  c.layers = positive_int(config, "n_layers");
  c.heads = positive_int(config, "n_heads");
  c.kv_heads = positive_int(config, "n_kv_heads", c.heads);
  JET_CHECK(c.hidden % c.heads == 0, config.source(), ": d_model ", c.hidden, " is not a multiple of n_heads ",
            c.heads);
  c.head_dim = c.hidden / c.heads;
  c.vocab = config.has("embedding_size") ? positive_int(config, "embedding_size") : positive_int(config, "vocab_size");
  c.rms_eps = positive_number(config, "rms_norm_eps");
  c.rope_theta = positive_number(config, "rope_theta");
  c.max_positions = positive_int(config, "max_sequence_length");
  c.tied = config.get_bool("weight_tying", false);
  c.qk_norm = false;
  c.block_causal = false;
  c.block_size = positive_int(config, "block_size", kBlockSize);
  if (config.has("block_size")) c.trained_block_size = c.block_size;
  c.mask_token_id = config.get_int("mask_token_id", kMaskId);
}

}  // namespace

const Architecture& llada_architecture() {
  // ff_proj is the gate (SiLU side); ff_out is the down projection inside a block and the LM head
  // outside. No qk-norm, no experts.
  static const Architecture llada = {
      .model_type = "llada",
      .hf_architecture = "LLaDAModelLM",
      .family = ModelFamily::LLADA,
      .read = read,
      .fixed_keys = {{"block_type", {"llama"}},
                     {"activation_type", {"silu"}},
                     {"layer_norm_type", {"rms"}},
                     {"include_bias", {false}},
                     {"include_qkv_bias", {false}},
                     {"bias_for_layer_norm", {false}},
                     {"layer_norm_with_affine", {true}},
                     {"attention_layer_norm", {false}},
                     {"alibi", {false}},
                     {"rope", {true}},
                     {"scale_logits", {false}},
                     {"input_emb_norm", {false}},
                     {"multi_query_attention", {false}}},
      .names = {.embed = "model.transformer.wte.weight",
                .final_norm = "model.transformer.ln_f.weight",
                .lm_head = "model.transformer.ff_out.weight",
                .layer_prefix = "model.transformer.blocks.",
                .attn_norm = "attn_norm.weight",
                .q_proj = "q_proj.weight",
                .k_proj = "k_proj.weight",
                .v_proj = "v_proj.weight",
                .o_proj = "attn_out.weight",
                .mlp_norm = "ff_norm.weight",
                .gate_proj = "ff_proj.weight",
                .up_proj = "up_proj.weight",
                .down_proj = "ff_out.weight"},
      .default_eos_ids = {126081, 126348},
  };
  return llada;
}

}  // namespace jet
