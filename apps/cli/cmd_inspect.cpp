// `jetengine inspect --model DIR [--json]`: what a checkpoint is (family, sizes, special tokens,
// parameter count, dtype, shards), whether its weights match its config and whether its tokenizer
// and chat template load. Exit code 1 when any does not.
#include <cstdio>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "arg_parser.h"
#include "commands.h"
#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/weight_map.h"
#include "jet/chat.h"
#include "jet/tokenizer.h"
#include "tokenizer/chat_template.h"

namespace jet::cli {
namespace {

constexpr const char* kUsage =
    "usage: jetengine inspect --model DIR [--json]\n"
    "  --model DIR   a HuggingFace model directory (config.json + *.safetensors)\n"
    "  --json        print one JSON object instead of text\n"
    "Exit code 0 when the weights match the config and the tokenizer and chat template (if any)\n"
    "load, 1 otherwise.\n";

constexpr size_t kMaxListedUnexpected = 5;

struct Inspection {
  std::string dir;
  ModelConfig config;
  int64_t parameters;
  DType dtype;
  size_t shards;
  WeightReport report;
  // "OK ..." / "none", or the error that loading gave; ok false for an error.
  std::string tokenizer, chat_template;
  bool tokenizer_ok = false, chat_template_ok = false;
  bool ok() const { return report.ok() && tokenizer_ok && chat_template_ok; }
};

void check_tokenizer(Inspection& x) {
  try {
    const Tokenizer tokenizer = Tokenizer::from_dir(x.dir);
    x.tokenizer = "OK (" + std::to_string(tokenizer.size()) + " ids)";
    x.tokenizer_ok = true;
  } catch (const Error& e) {
    x.tokenizer = e.what();
  }
}

// A folder without a template (base models) is fine; one whose template does not compile is not.
void check_chat_template(Inspection& x) {
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

// 4411424256 -> "4.41B"
std::string short_count(int64_t n) {
  const struct {
    double scale;
    const char* suffix;
  } units[] = {{1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& unit : units) {
    if (n >= unit.scale) {
      std::ostringstream text;
      text << std::fixed << std::setprecision(2) << static_cast<double>(n) / unit.scale << unit.suffix;
      return text.str();
    }
  }
  return std::to_string(n);
}

std::string join(const std::vector<int64_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out;
}

void print_text(const Inspection& x) {
  const ModelConfig& c = x.config;
  std::printf("model:           %s\n", x.dir.c_str());
  std::printf("model_type:      %s (%s attention%s)\n", c.model_type.c_str(),
              c.block_causal ? "block-causal" : "bidirectional", c.qk_norm ? ", qk-norm" : "");
  std::printf("layers:          %lld\n", static_cast<long long>(c.layers));
  std::printf("hidden:          %lld\n", static_cast<long long>(c.hidden));
  std::printf("heads:           %lld (kv heads %lld, head_dim %lld)\n", static_cast<long long>(c.heads),
              static_cast<long long>(c.kv_heads), static_cast<long long>(c.head_dim));
  std::printf("intermediate:    %lld\n", static_cast<long long>(c.intermediate));
  if (c.num_experts > 0) {
    std::printf("experts:         %lld (top-%lld, moe_intermediate %lld)\n", static_cast<long long>(c.num_experts),
                static_cast<long long>(c.experts_per_token), static_cast<long long>(c.moe_intermediate));
  }
  std::printf("vocab:           %lld\n", static_cast<long long>(c.vocab));
  std::printf("tied embeddings: %s\n", c.tied ? "yes" : "no");
  std::printf("block size:      %lld\n", static_cast<long long>(c.block_size));
  std::printf("mask token:      %lld\n", static_cast<long long>(c.mask_token_id));
  std::printf("eos tokens:      %s\n", join(c.eos_token_ids).c_str());
  std::printf("parameters:      %s (%lld)\n", short_count(x.parameters).c_str(), static_cast<long long>(x.parameters));
  std::printf("dtype:           %s\n", std::string(dtype_name(x.dtype)).c_str());
  if (c.fp8_checkpoint) std::printf("quantization:    FP8 checkpoint (e4m3 projections with scales)\n");
  std::printf("shards:          %zu\n", x.shards);
  if (!x.report.unexpected.empty()) {
    std::printf("unexpected:      %zu tensor(s), ignored:", x.report.unexpected.size());
    for (size_t i = 0; i < x.report.unexpected.size() && i < kMaxListedUnexpected; ++i) {
      std::printf(" %s", x.report.unexpected[i].c_str());
    }
    std::printf("%s\n", x.report.unexpected.size() > kMaxListedUnexpected ? " ..." : "");
  }
  std::printf("tokenizer: %s\n", x.tokenizer.c_str());
  std::printf("chat template: %s\n", x.chat_template.c_str());
  if (x.report.ok()) {
    std::printf("weights: OK\n");
    return;
  }
  std::printf("weights: %zu problem(s)\n", x.report.problems.size());
  for (const std::string& problem : x.report.problems) std::printf("  %s\n", problem.c_str());
}

void print_json(const Inspection& x) {
  const ModelConfig& c = x.config;
  nlohmann::ordered_json out = {
      // ordered: keys print in this order
      {"model", x.dir},
      {"model_type", c.model_type},
      {"family", std::string(family_name(c.family))},
      {"layers", c.layers},
      {"hidden", c.hidden},
      {"heads", c.heads},
      {"kv_heads", c.kv_heads},
      {"head_dim", c.head_dim},
      {"intermediate", c.intermediate},
      {"experts", c.num_experts},
      {"experts_per_token", c.experts_per_token},
      {"moe_intermediate", c.moe_intermediate},
      {"vocab", c.vocab},
      {"rms_eps", c.rms_eps},
      {"rope_theta", c.rope_theta},
      {"max_positions", c.max_positions},
      {"tied", c.tied},
      {"qk_norm", c.qk_norm},
      {"block_causal", c.block_causal},
      {"block_size", c.block_size},
      {"mask_token_id", c.mask_token_id},
      {"eos_token_ids", c.eos_token_ids},
      {"bos_token_id", c.bos_token_id ? nlohmann::ordered_json(*c.bos_token_id) : nlohmann::ordered_json(nullptr)},
      {"parameters", x.parameters},
      {"dtype", std::string(dtype_name(x.dtype))},
      {"fp8_checkpoint", c.fp8_checkpoint},
      {"shards", x.shards},
      {"weights_ok", x.report.ok()},
      {"problems", x.report.problems},
      {"unexpected", x.report.unexpected},
      {"tokenizer_ok", x.tokenizer_ok},
      {"tokenizer", x.tokenizer},
      {"chat_template_ok", x.chat_template_ok},
      {"chat_template", x.chat_template},
  };
  std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

}  // namespace

int cmd_inspect(const Args& args) {
  ArgParser flags(args, {"--model"}, {"--json", "--help"});
  if (flags.has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  Inspection x;
  x.dir = flags.require("--model");
  x.config = load_model_config(x.dir);
  const Checkpoint checkpoint(x.dir);
  x.parameters = checkpoint.parameter_count();
  x.dtype = checkpoint.dominant_dtype();
  x.shards = checkpoint.shard_count();
  x.report = validate_weights(x.config, checkpoint);
  check_tokenizer(x);
  check_chat_template(x);
  if (flags.has("--json")) {
    print_json(x);
  } else {
    print_text(x);
  }
  return x.ok() ? 0 : 1;
}

}  // namespace jet::cli
