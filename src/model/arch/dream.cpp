// Dream (Dream-v0-7B and its kin, HKU): Qwen2.5 trained as a masked diffusion model over the
// whole sequence, model_type "Dream" / DreamModel. The Qwen2 network and keys (fast_dllm_v2.cpp;
// head_dim is always hidden / heads, as Dream's code computes it), bidirectional attention like
// LLaDA, and shifted logits: position p is predicted by the hidden state of p - 1
// (docs/decoding.md §1). mask_token_id: 151666 when absent. Dream trains on whole sequences, so
// its block length of 32 is a default only. Dream's code gives q, k and v biases whatever its
// config's attention_bias says, so that key is not read.
#include "core/error.h"
#include "model/arch/families.h"

namespace jet {

namespace {

constexpr int64_t kBlockSize = 32;
constexpr int64_t kMaskId = 151666;

void read(const JsonObject& config, ModelConfig& c) {
  read_qwen2_keys(config, c);
  if (config.has("head_dim")) {
    JET_CHECK(config.get_int("head_dim") == c.head_dim, config.source(), ": head_dim ", config.get_int("head_dim"),
              " differs from hidden_size / num_attention_heads = ", c.head_dim, ", which Dream uses");
  }
  c.block_causal = false;
  c.block_size = positive_int(config, "block_size", kBlockSize);
  if (config.has("block_size")) c.trained_block_size = c.block_size;
  c.mask_token_id = config.get_int("mask_token_id", kMaskId);
}

}  // namespace

const Architecture& dream_architecture() {
  static const Architecture dream = {
      .model_type = "Dream",
      .hf_architecture = "DreamModel",
      .family = ModelFamily::DREAM,
      .read = read,
      .fixed_keys = qwen2_fixed_keys(),
      .names = qwen2_names(),
      .default_eos_ids = {151643},
  };
  return dream;
}

}  // namespace jet
