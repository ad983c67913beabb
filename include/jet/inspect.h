// What a model folder is, without loading its weights: the architecture its config.json
// describes, the checkpoint's size, dtype and shards, whether its tensors match the config, and
// whether its tokenizer and chat template load (the CLI's `inspect`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace jet {

struct ModelInspection {
  std::string dir;
  std::string model_type;  // as config.json writes it
  std::string family;      // "sdar", "sdar_moe", "llada", ..., "EfficientDLM" (model/model_config.h family_name)
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0;
  int64_t experts = 0, experts_per_token = 0, moe_intermediate = 0;
  int64_t vocab = 0, max_positions = 0, block_size = 0, mask_token_id = 0;
  std::string block_size_source;  // "config.json", "the model's name, NAME", or the family's default
  double rms_eps = 0, rope_theta = 0;
  bool tied = false, qk_norm = false, block_causal = false, fp8_checkpoint = false;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id;

  int64_t parameters = 0;
  std::string dtype;  // the checkpoint's most common element type ("BF16", "F8_E4M3", ...)
  size_t shards = 0;
  std::vector<std::string> problems;    // the weights against the config; empty when they match
  std::vector<std::string> unexpected;  // tensors the model does not read (not a problem)
  // "OK (N ids)" / "OK" / "none", or the error loading gave; *_ok false for an error.
  std::string tokenizer, chat_template;
  bool tokenizer_ok = false, chat_template_ok = false;

  bool weights_ok() const { return problems.empty(); }
  bool ok() const { return weights_ok() && tokenizer_ok && chat_template_ok; }
};

// Throws jet::Error when config.json or the checkpoint cannot be read at all; problems with the
// tensors, the tokenizer or the chat template are reported in the result instead.
ModelInspection inspect_model(const std::string& dir);

}  // namespace jet
