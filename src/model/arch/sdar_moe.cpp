// SDAR-MoE (SDAR-30B-A3B): SDAR's network with Qwen3-MoE routed-expert MLPs, model_type
// "sdar_moe" / SDARMoeForCausalLM. reference/models.md §1. Keys: SDAR's (sdar.cpp), plus
// num_experts, num_experts_per_tok, moe_intermediate_size, norm_topk_prob (false when absent),
// decoder_sparse_step (1) and mlp_only_layers (none): the layers that keep a dense MLP.
#include "model/arch/families.h"

namespace jet {

namespace {

void read(const JsonObject& config, ModelConfig& c) {
  read_qwen3_keys(config, c);
  c.num_experts = positive_int(config, "num_experts");
  c.experts_per_token = positive_int(config, "num_experts_per_tok");
  c.moe_intermediate = positive_int(config, "moe_intermediate_size");
  c.norm_topk_prob = config.get_bool("norm_topk_prob", false);
  c.decoder_sparse_step = positive_int(config, "decoder_sparse_step", 1);
  c.mlp_only_layers = config.get_int_list("mlp_only_layers", {});
}

}  // namespace

const Architecture& sdar_moe_architecture() {
  static const Architecture sdar_moe = {
      .model_type = "sdar_moe",
      .hf_architecture = "SDARMoeForCausalLM",
      .family = ModelFamily::SDAR_MOE,
      .read = read,
      .fixed_keys = qwen3_fixed_keys(),
      .names = qwen3_names(),
      .default_eos_ids = {151645, 151643},
      .block_size_from_name = true,
  };
  return sdar_moe;
}

}  // namespace jet
