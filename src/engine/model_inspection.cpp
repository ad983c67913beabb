// inspect_model (jet/inspect.h): reads a folder's config, checkpoint header and tokenizer files.
#include "jet/inspect.h"

#include "jet/chat.h"
#include "jet/tokenizer.h"
#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/weight_map.h"
#include "chat/chat_template.h"

namespace jet {

namespace {

void check_tokenizer(ModelInspection& x) {
  try {
    const Tokenizer tokenizer = Tokenizer::from_dir(x.dir);
    x.tokenizer = "OK (" + std::to_string(tokenizer.size()) + " ids)";
    x.tokenizer_ok = true;
  } catch (const Error& e) {
    x.tokenizer = e.what();
  }
}

// A folder without a template (base models) is fine; one whose template does not compile is not.
void check_chat_template(ModelInspection& x) {
  const std::string config = x.dir + "/tokenizer_config.json";
  x.chat_template_ok = true;
  if (!has_chat_template_source(config)) {
    x.chat_template = "none";
    return;
  }
  try {
    ChatTemplate::from_tokenizer_config(config);
    x.chat_template = "OK";
  } catch (const Error& e) {
    x.chat_template = e.what();
    x.chat_template_ok = false;
  }
}

}  // namespace

ModelInspection inspect_model(const std::string& dir) {
  ModelInspection x;
  x.dir = dir;
  const ModelConfig c = load_model_config(dir);
  x.model_type = c.model_type;
  x.family = std::string(family_name(c.family));
  x.layers = c.layers;
  x.hidden = c.hidden;
  x.heads = c.heads;
  x.kv_heads = c.kv_heads;
  x.head_dim = c.head_dim;
  x.intermediate = c.intermediate;
  x.experts = c.num_experts;
  x.experts_per_token = c.experts_per_token;
  x.moe_intermediate = c.moe_intermediate;
  x.vocab = c.vocab;
  x.max_positions = c.max_positions;
  x.block_size = c.block_size;
  x.block_size_source = c.block_size_source;
  x.mask_token_id = c.mask_token_id;
  x.rms_eps = c.rms_eps;
  x.rope_theta = c.rope_theta;
  x.tied = c.tied;
  x.qk_norm = c.qk_norm;
  x.block_causal = c.block_causal;
  x.fp8_checkpoint = c.fp8_checkpoint;
  x.eos_token_ids = c.eos_token_ids;
  x.bos_token_id = c.bos_token_id;

  const Checkpoint checkpoint(dir);
  x.parameters = checkpoint.parameter_count();
  x.dtype = std::string(dtype_name(checkpoint.dominant_dtype()));
  x.shards = checkpoint.shard_count();
  WeightReport report = validate_weights(c, checkpoint);
  x.problems = std::move(report.problems);
  x.unexpected = std::move(report.unexpected);
  check_tokenizer(x);
  check_chat_template(x);
  return x;
}

}  // namespace jet
