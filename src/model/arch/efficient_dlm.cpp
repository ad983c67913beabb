// Efficient-DLM (NVIDIA, 4B / 8B, arXiv 2512.14067): Qwen3 continued as a block diffusion model,
// architectures ["EfficientDLM"] with the base model's model_type "qwen3" (so only the
// architectures entry tells it from a plain Qwen3). The SDAR network and keys (sdar.cpp):
// block-causal attention with clean context, per-head q/k norm, and no shift (its generate
// passes shift_logits=False: position p is predicted by its own row). block_size: 32 when absent
// (the model card decodes with block_length 32); mask_token_id: 151662 when absent.
#include "model/arch/families.h"

namespace jet {

namespace {

constexpr int64_t kBlockSize = 32;
constexpr int64_t kMaskId = 151662;

// Its config.json carries the training code's switches beside Qwen3's keys; the published
// checkpoints set these three so, and the other values change the network: without q/k norm, or
// with layers split into autoregressive and diffusion ones.
std::vector<FixedKey> fixed_keys() {
  std::vector<FixedKey> keys = qwen3_fixed_keys();
  keys.push_back({"disable_qk_norm", {false}});
  keys.push_back({"num_ar_layers", {0}});
  keys.push_back({"num_diffusion_layers", {0}});
  return keys;
}

void read(const JsonObject& config, ModelConfig& c) {
  read_qwen3_keys(config, c);  // SDAR's defaults for the block size and mask id, replaced here
  c.block_size = positive_int(config, "block_size", kBlockSize);
  c.trained_block_size = c.block_size;
  c.mask_token_id = config.get_int("mask_token_id", kMaskId);
}

}  // namespace

const Architecture& efficient_dlm_architecture() {
  static const Architecture efficient_dlm = {
      .model_type = "qwen3",
      .hf_architecture = "EfficientDLM",
      .family = ModelFamily::EFFICIENT_DLM,
      .read = read,
      .fixed_keys = fixed_keys(),
      .names = qwen3_names(),
      .default_eos_ids = {151645, 151643},
      .model_type_is_base = true,
  };
  return efficient_dlm;
}

}  // namespace jet
