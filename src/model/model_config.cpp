// config.json -> ModelConfig: the family's architecture (model/architecture.h) found and asked to
// read its keys, unsupported features refused, quantization_config and the stop ids read, and
// the cross-field sanity checks every family shares.
#include "model/model_config.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/json_object.h"
#include "model/architecture.h"

namespace jet {
namespace fs = std::filesystem;

namespace {

// A config that lists only <|endoftext|> still ends chat turns with the turn-end token, which the
// reference decoders stop on: Qwen <|im_end|> and LLaDA <|eot_id|>.
struct TurnEnd {
  int64_t end_of_text, end_of_turn;
};
constexpr TurnEnd kTurnEnds[] = {{151643, 151645}, {126081, 126348}};

void check_fixed_keys(const JsonObject& config, const Architecture& arch) {
  for (const FixedKey& fixed : arch.fixed_keys) {
    if (!config.has(fixed.key)) continue;
    const Json& value = config.json().at(fixed.key);
    JET_CHECK(std::find(fixed.supported.begin(), fixed.supported.end(), value) != fixed.supported.end(),
              config.source(), ": ", fixed.key, " = ", json_excerpt(value), " is not supported (only ",
              fixed.supported.front().dump(), ")");
  }
}

// The name a model folder was published under: the folder's own, or, inside a Hugging Face
// cache (<cache>/models--ORG--NAME/snapshots/<revision>), NAME.
std::string published_name(const std::string& model_dir) {
  const fs::path dir = fs::absolute(fs::path(model_dir)).lexically_normal();
  const fs::path folder = dir.has_filename() ? dir : dir.parent_path();
  const std::string repo = folder.parent_path().parent_path().filename().string();
  if (folder.parent_path().filename() == "snapshots" && repo.rfind("models--", 0) == 0) {
    return repo.substr(repo.rfind("--") + 2);
  }
  return folder.filename().string();
}

// N from a "bN" part of the name ("SDAR-4B-Chat-b64", "SDAR-30B-A3B-Chat-b32"; parts split at
// '-' and '_'), if there is exactly one such part with N in [1, 65536].
std::optional<int64_t> block_size_in_name(const std::string& name) {
  std::optional<int64_t> found;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t end = std::min(name.find_first_of("-_", start), name.size());
    const std::string part = name.substr(start, end - start);
    if (part.size() >= 2 && part.size() <= 6 && (part[0] == 'b' || part[0] == 'B') &&
        std::all_of(part.begin() + 1, part.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      const int64_t n = std::stoll(part.substr(1));
      if (n < 1 || n > 65536 || found) return std::nullopt;
      found = n;
    }
    start = end + 1;
  }
  return found;
}

// config.json's block_size, else (for the families that publish -bN checkpoints without one)
// the name's, else the family's default that arch.read left.
void resolve_block_size(const JsonObject& config, const Architecture& arch, const std::string& model_dir,
                        ModelConfig& c) {
  if (config.has("block_size")) {
    c.block_size_source = "config.json";
    return;
  }
  const std::string name = published_name(model_dir);
  if (const std::optional<int64_t> n = arch.block_size_from_name ? block_size_in_name(name) : std::nullopt) {
    c.block_size = *n;
    c.trained_block_size = *n;
    c.block_size_source = "the model's name, " + name;
    return;
  }
  c.block_size_source = "the family's default: config.json has no block_size";
}

// The first supported architecture config.json's `architectures` list names (of those whose
// model_type is their base model's, with base_only), or null.
const Architecture* listed_architecture(const JsonObject& config, bool base_only) {
  if (!config.has("architectures") || !config.json().at("architectures").is_array()) return nullptr;
  for (const Json& name : config.json().at("architectures")) {
    const Architecture* a = name.is_string() ? find_architecture_by_hf_name(name.get<std::string>()) : nullptr;
    if (a && (!base_only || a->model_type_is_base)) return a;
  }
  return nullptr;
}

const Architecture& detect_architecture(const JsonObject& config, std::string* model_type) {
  if (const Architecture* a = listed_architecture(config, /*base_only=*/true)) {
    *model_type = config.has("model_type") ? config.get_string("model_type") : a->model_type;
    JET_CHECK(*model_type == a->model_type, config.source(), ": architectures names ", a->hf_architecture,
              ", whose model_type is '", a->model_type, "', but model_type is '", *model_type, "'");
    return *a;
  }
  if (config.has("model_type")) {
    *model_type = config.get_string("model_type");
    if (const Architecture* a = find_architecture(*model_type)) return *a;
    throw Error(str(config.source(), ": unsupported model_type '", *model_type,
                    "' (supported: ", supported_model_types(), ")"));
  }
  JET_CHECK(config.has("architectures") && config.json().at("architectures").is_array(), config.source(),
            ": missing required key 'model_type' (and no 'architectures' list to infer it from)");
  if (const Architecture* a = listed_architecture(config, /*base_only=*/false)) {
    *model_type = a->model_type;
    return *a;
  }
  throw Error(str(config.source(), ": no model_type, and architectures ",
                  json_excerpt(config.json().at("architectures")),
                  " name no supported model (supported: ", supported_model_types(), ")"));
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
    ids = architecture_of(c.family).default_eos_ids;
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
  if (c.num_experts == 0) return;
  JET_CHECK(c.experts_per_token <= c.num_experts, source, ": num_experts_per_tok ", c.experts_per_token,
            " exceeds num_experts ", c.num_experts);
  for (int64_t layer : c.mlp_only_layers) {
    JET_CHECK(layer >= 0 && layer < c.layers, source, ": mlp_only_layers entry ", layer, " is not a layer index [0, ",
              c.layers, ")");
  }
}

}  // namespace

std::string_view family_name(ModelFamily family) { return architecture_of(family).name(); }

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
  const Architecture& arch = detect_architecture(config, &c.model_type);
  c.family = arch.family;
  check_fixed_keys(config, arch);
  arch.read(config, c);
  resolve_block_size(config, arch, model_dir, c);
  if (config.has("bos_token_id")) c.bos_token_id = config.get_int("bos_token_id");
  read_quantization(config, c);
  check_consistency(c, path);
  c.eos_token_ids = read_eos_ids(config, model_dir, c);
  return c;
}

}  // namespace jet
