// config.json -> ModelConfig: family detection, the key names of each family, defaults for keys
// that real checkpoints omit, rejection of unsupported features, and cross-field sanity checks.
#include "model/model_config.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/json_object.h"

namespace jet {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSupportedModelTypes = "sdar, sdar_moe, llada";

struct FamilyName {
  const char* model_type;
  const char* architecture;  // HF `architectures` entry, used when model_type is absent
  ModelFamily family;
};
constexpr FamilyName kFamilies[] = {
    {"sdar", "SDARForCausalLM", ModelFamily::SDAR},
    {"sdar_moe", "SDARMoeForCausalLM", ModelFamily::SDAR_MOE},
    {"llada", "LLaDAModelLM", ModelFamily::LLADA},
};

// Defaults where real checkpoints omit the key (SDAR-4B-Chat's HF config has no block_size or
// mask_token_id; LLaDA's has no block size at all). Values from reference/models.md.
constexpr int64_t kSdarBlockSize = 4;
constexpr int64_t kSdarMaskId = 151669;
constexpr int64_t kLladaBlockSize = 32;  // the LLaDA demo's block length, a default only
constexpr int64_t kLladaMaskId = 126336;
const std::vector<int64_t> kSdarEosIds = {151645, 151643};
const std::vector<int64_t> kLladaEosIds = {126081, 126348};

// A config that lists only <|endoftext|> still ends chat turns with the turn-end token, which the
// reference decoders stop on: Qwen <|im_end|> and LLaDA <|eot_id|>.
struct TurnEnd {
  int64_t end_of_text, end_of_turn;
};
constexpr TurnEnd kTurnEnds[] = {{151643, 151645}, {126081, 126348}};

// Keys that switch on something the engine does not implement. Each may be absent or null, or
// hold its one supported value.
struct FixedKey {
  const char* key;
  std::vector<Json> supported;  // the first is the one the error names
};

const std::vector<FixedKey>& fixed_keys(ModelFamily family) {
  static const std::vector<FixedKey> sdar = {
      {"attention_bias", {false}},
      // HF writes "no scaling" either as null or as the default rope type.
      {"rope_scaling", {nullptr, {{"rope_type", "default"}}, {{"type", "default"}}}},
      {"use_sliding_window", {false}},
      {"hidden_act", {"silu"}}};
  static const std::vector<FixedKey> llada = {{"block_type", {"llama"}},
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
                                              {"multi_query_attention", {false}}};
  return family == ModelFamily::LLADA ? llada : sdar;
}

void check_fixed_keys(const JsonObject& config, ModelFamily family) {
  for (const FixedKey& fixed : fixed_keys(family)) {
    if (!config.has(fixed.key)) continue;
    const Json& value = config.json().at(fixed.key);
    JET_CHECK(std::find(fixed.supported.begin(), fixed.supported.end(), value) != fixed.supported.end(),
              config.source(), ": ", fixed.key, " = ", json_excerpt(value), " is not supported (only ",
              fixed.supported.front().dump(), ")");
  }
}

ModelFamily detect_family(const JsonObject& config, std::string* model_type) {
  if (config.has("model_type")) {
    *model_type = config.get_string("model_type");
    for (const auto& f : kFamilies) {
      if (*model_type == f.model_type) return f.family;
    }
    throw Error(
        str(config.source(), ": unsupported model_type '", *model_type, "' (supported: ", kSupportedModelTypes, ")"));
  }
  JET_CHECK(config.has("architectures") && config.json().at("architectures").is_array(), config.source(),
            ": missing required key 'model_type' (and no 'architectures' list to infer it from)");
  for (const Json& arch : config.json().at("architectures")) {
    for (const auto& f : kFamilies) {
      if (arch.is_string() && arch.get<std::string>() == f.architecture) {
        *model_type = f.model_type;
        return f.family;
      }
    }
  }
  throw Error(str(config.source(), ": no model_type, and architectures ",
                  json_excerpt(config.json().at("architectures")),
                  " name no supported model (supported: ", kSupportedModelTypes, ")"));
}

int64_t positive_int(const JsonObject& config, const std::string& key) {
  int64_t v = config.get_int(key);
  JET_CHECK(v > 0, config.source(), ": key '", key, "' must be positive, got ", v);
  return v;
}

int64_t positive_int(const JsonObject& config, const std::string& key, int64_t fallback) {
  return config.has(key) ? positive_int(config, key) : fallback;
}

double positive_number(const JsonObject& config, const std::string& key) {
  double v = config.get_number(key);
  JET_CHECK(v > 0, config.source(), ": key '", key, "' must be positive, got ", v);
  return v;
}

// Qwen3Config's head_dim when config.json leaves it out (not hidden / heads: SDAR-4B's q is wider
// than its hidden state).
constexpr int64_t kQwen3HeadDim = 128;

// LLaDA's head_dim, which its config leaves implicit: hidden / heads, which must divide exactly.
int64_t implicit_head_dim(const JsonObject& config, const char* hidden_key, const char* heads_key, int64_t hidden,
                          int64_t heads) {
  JET_CHECK(hidden % heads == 0, config.source(), ": ", hidden_key, " ", hidden, " is not a multiple of ", heads_key,
            " ", heads);
  return hidden / heads;
}

// SDAR and SDAR-MoE use the Qwen3 / Qwen3-MoE key names.
void read_sdar(const JsonObject& config, ModelConfig& c) {
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
  c.block_size = positive_int(config, "block_size", kSdarBlockSize);
  c.trained_block_size = c.block_size;
  c.mask_token_id = config.get_int("mask_token_id", kSdarMaskId);
  if (c.family != ModelFamily::SDAR_MOE) return;
  c.num_experts = positive_int(config, "num_experts");
  c.experts_per_token = positive_int(config, "num_experts_per_tok");
  c.moe_intermediate = positive_int(config, "moe_intermediate_size");
  c.norm_topk_prob = config.get_bool("norm_topk_prob", false);
  c.decoder_sparse_step = positive_int(config, "decoder_sparse_step", 1);
  c.mlp_only_layers = config.get_int_list("mlp_only_layers", {});
}

// LLaDA (and dLLM-Var) use the OLMo key names.
void read_llada(const JsonObject& config, ModelConfig& c) {
  c.hidden = positive_int(config, "d_model");
  c.intermediate = positive_int(config, "mlp_hidden_size");
  c.layers = positive_int(config, "n_layers");
  c.heads = positive_int(config, "n_heads");
  c.kv_heads = positive_int(config, "n_kv_heads", c.heads);
  c.head_dim = implicit_head_dim(config, "d_model", "n_heads", c.hidden, c.heads);
  // embedding_size is the (possibly padded) row count of the embedding; vocab_size the tokenizer's.
  c.vocab = config.has("embedding_size") ? positive_int(config, "embedding_size") : positive_int(config, "vocab_size");
  c.rms_eps = positive_number(config, "rms_norm_eps");
  c.rope_theta = positive_number(config, "rope_theta");
  c.max_positions = positive_int(config, "max_sequence_length");
  c.tied = config.get_bool("weight_tying", false);
  c.qk_norm = false;
  c.block_causal = false;
  c.block_size = positive_int(config, "block_size", kLladaBlockSize);
  if (config.has("block_size")) c.trained_block_size = c.block_size;
  c.mask_token_id = config.get_int("mask_token_id", kLladaMaskId);
}

// quantization_config: the FP8 formats the loader reads (fp8_weights.h); any other method is
// refused here, before its tensors would be reported missing one by one.
void read_quantization(const JsonObject& config, ModelConfig& c) {
  if (!config.has("quantization_config")) return;
  const JsonObject q(config.json().at("quantization_config"), config.source() + ": quantization_config");
  const std::string method = q.get_string("quant_method");
  if (method == "fp8") {
    const std::string fmt = q.get_string("fmt", "e4m3");
    JET_CHECK(fmt == "e4m3", q.source(), ": fmt '", fmt, "' is not supported (only e4m3)");
    if (q.has("weight_block_size")) {
      const std::vector<int64_t> block = q.get_int_list("weight_block_size", {});
      JET_CHECK(block == std::vector<int64_t>({128, 128}), q.source(), ": weight_block_size ",
                json_excerpt(q.json().at("weight_block_size")), " is not supported (only [128, 128])");
    }
  } else if (method == "modelopt") {
    const std::string algo = q.get_string("quant_algo");
    JET_CHECK(algo == "FP8", q.source(), ": modelopt quant_algo '", algo, "' is not supported (only FP8)");
  } else {
    throw Error(str(q.source(), ": quant_method '", method,
                    "' is not supported (supported: fp8, modelopt with quant_algo FP8; bf16, f16 and f32 "
                    "checkpoints need no quantization_config)"));
  }
  c.fp8_checkpoint = true;
}

void check_token_id(const ModelConfig& c, const std::string& source, const char* what, int64_t id) {
  JET_CHECK(id >= 0 && id < c.vocab, source, ": ", what, " ", id, " is outside the vocabulary [0, ", c.vocab, ")");
}

// Stop tokens: generation_config.json's eos_token_id, else config.json's, else the family's.
std::vector<int64_t> read_eos_ids(const JsonObject& config, const std::string& model_dir, const ModelConfig& c) {
  std::vector<int64_t> ids;
  std::string source = (fs::path(model_dir) / "generation_config.json").string();
  const std::optional<JsonObject> generation =
      fs::exists(source) ? std::optional(JsonObject::from_file(source)) : std::nullopt;
  if (generation && generation->has("eos_token_id")) {
    ids = generation->get_int_or_int_list("eos_token_id", {});
  } else if (config.has("eos_token_id")) {
    source = config.source();
    ids = config.get_int_or_int_list("eos_token_id", {});
  } else {
    source = str("the ", family_name(c.family), " family's default");
    ids = c.family == ModelFamily::LLADA ? kLladaEosIds : kSdarEosIds;
  }
  JET_CHECK(!ids.empty(), source, ": eos_token_id is an empty list");
  for (int64_t id : ids) check_token_id(c, source, "eos_token_id", id);
  for (const TurnEnd& t : kTurnEnds) {
    bool has_text_end = std::count(ids.begin(), ids.end(), t.end_of_text) > 0;
    bool has_turn_end = std::count(ids.begin(), ids.end(), t.end_of_turn) > 0;
    if (has_text_end && !has_turn_end && t.end_of_turn < c.vocab) ids.push_back(t.end_of_turn);
  }
  return ids;
}

// Sizes beyond any real model's: past them the expected-tensor lists and shapes would grow without
// bound (or overflow) before a single tensor is read.
struct SizeLimit {
  const char* what;
  int64_t ModelConfig::*size;
  int64_t limit;
};
constexpr SizeLimit kSizeLimits[] = {
    {"layers", &ModelConfig::layers, 4096},
    {"hidden size", &ModelConfig::hidden, 1 << 20},
    {"intermediate size", &ModelConfig::intermediate, 1 << 22},
    {"attention heads", &ModelConfig::heads, 4096},
    {"head_dim", &ModelConfig::head_dim, 4096},
    {"vocabulary", &ModelConfig::vocab, int64_t{1} << 26},
    {"experts", &ModelConfig::num_experts, 1 << 16},
    {"expert width", &ModelConfig::moe_intermediate, 1 << 22},
};

void check_consistency(const ModelConfig& c, const std::string& source) {
  for (const SizeLimit& s : kSizeLimits) {
    JET_CHECK(c.*s.size <= s.limit, source, ": ", s.what, " ", c.*s.size, " is past what this engine supports (",
              s.limit, ")");
  }
  JET_CHECK(c.heads % c.kv_heads == 0, source, ": ", c.heads, " attention heads are not a multiple of ", c.kv_heads,
            " key/value heads");
  check_token_id(c, source, "mask_token_id", c.mask_token_id);
  if (c.bos_token_id) check_token_id(c, source, "bos_token_id", *c.bos_token_id);
  if (c.family != ModelFamily::SDAR_MOE) return;
  JET_CHECK(c.experts_per_token <= c.num_experts, source, ": num_experts_per_tok ", c.experts_per_token,
            " exceeds num_experts ", c.num_experts);
  for (int64_t layer : c.mlp_only_layers) {
    JET_CHECK(layer >= 0 && layer < c.layers, source, ": mlp_only_layers entry ", layer, " is not a layer index [0, ",
              c.layers, ")");
  }
}

}  // namespace

std::string_view family_name(ModelFamily family) {
  for (const auto& f : kFamilies) {
    if (f.family == family) return f.model_type;
  }
  return "?";
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
  if (num_experts == 0) return false;
  bool dense = std::count(mlp_only_layers.begin(), mlp_only_layers.end(), layer) > 0;
  return !dense && (layer + 1) % decoder_sparse_step == 0;
}

ModelConfig load_model_config(const std::string& model_dir) {
  const std::string path = (fs::path(model_dir) / "config.json").string();
  JET_CHECK(fs::exists(path), "model directory ", model_dir, " has no config.json");
  const JsonObject config = JsonObject::from_file(path);

  ModelConfig c;
  c.family = detect_family(config, &c.model_type);
  check_fixed_keys(config, c.family);
  if (c.family == ModelFamily::LLADA) {
    read_llada(config, c);
  } else {
    read_sdar(config, c);
  }
  if (config.has("bos_token_id")) c.bos_token_id = config.get_int("bos_token_id");
  read_quantization(config, c);
  check_consistency(c, path);
  c.eos_token_ids = read_eos_ids(config, model_dir, c);
  return c;
}

}  // namespace jet
