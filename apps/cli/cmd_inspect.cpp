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
#include "jet/inspect.h"

namespace jet::cli {
namespace {

constexpr const char* kUsage =
    "usage: jetengine inspect --model DIR [--json]\n"
    "  --model DIR   a HuggingFace model directory (config.json + *.safetensors)\n"
    "  --json        print one JSON object instead of text\n"
    "Exit code 0 when the weights match the config and the tokenizer and chat template (if any)\n"
    "load, 1 otherwise.\n";

constexpr size_t kMaxListedUnexpected = 5;

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

void print_text(const ModelInspection& x) {
  std::printf("model:           %s\n", x.dir.c_str());
  // A family known by its architectures entry keeps its base model's model_type: name both.
  const std::string family = x.family != x.model_type ? x.family + ", " : "";
  std::printf("model_type:      %s (%s%s attention%s)\n", x.model_type.c_str(), family.c_str(),
              x.block_causal ? "block-causal" : "bidirectional", x.qk_norm ? ", qk-norm" : "");
  std::printf("layers:          %lld\n", static_cast<long long>(x.layers));
  std::printf("hidden:          %lld\n", static_cast<long long>(x.hidden));
  std::printf("heads:           %lld (kv heads %lld, head_dim %lld)\n", static_cast<long long>(x.heads),
              static_cast<long long>(x.kv_heads), static_cast<long long>(x.head_dim));
  std::printf("intermediate:    %lld\n", static_cast<long long>(x.intermediate));
  if (x.experts > 0) {
    std::printf("experts:         %lld (top-%lld, moe_intermediate %lld)\n", static_cast<long long>(x.experts),
                static_cast<long long>(x.experts_per_token), static_cast<long long>(x.moe_intermediate));
  }
  std::printf("vocab:           %lld\n", static_cast<long long>(x.vocab));
  std::printf("tied embeddings: %s\n", x.tied ? "yes" : "no");
  std::printf("block size:      %lld (from %s)\n", static_cast<long long>(x.block_size), x.block_size_source.c_str());
  std::printf("mask token:      %lld\n", static_cast<long long>(x.mask_token_id));
  std::printf("eos tokens:      %s\n", join(x.eos_token_ids).c_str());
  std::printf("parameters:      %s (%lld)\n", short_count(x.parameters).c_str(), static_cast<long long>(x.parameters));
  std::printf("dtype:           %s\n", x.dtype.c_str());
  if (x.fp8_checkpoint) std::printf("quantization:    FP8 checkpoint (e4m3 projections with scales)\n");
  std::printf("shards:          %zu\n", x.shards);
  if (!x.unexpected.empty()) {
    std::printf("unexpected:      %zu tensor(s), ignored:", x.unexpected.size());
    for (size_t i = 0; i < x.unexpected.size() && i < kMaxListedUnexpected; ++i) {
      std::printf(" %s", x.unexpected[i].c_str());
    }
    std::printf("%s\n", x.unexpected.size() > kMaxListedUnexpected ? " ..." : "");
  }
  std::printf("tokenizer: %s\n", x.tokenizer.c_str());
  std::printf("chat template: %s\n", x.chat_template.c_str());
  if (x.weights_ok()) {
    std::printf("weights: OK\n");
    return;
  }
  std::printf("weights: %zu problem(s)\n", x.problems.size());
  for (const std::string& problem : x.problems) std::printf("  %s\n", problem.c_str());
}

void print_json(const ModelInspection& x) {
  nlohmann::ordered_json out = {
      // ordered: keys print in this order
      {"model", x.dir},
      {"model_type", x.model_type},
      {"family", x.family},
      {"layers", x.layers},
      {"hidden", x.hidden},
      {"heads", x.heads},
      {"kv_heads", x.kv_heads},
      {"head_dim", x.head_dim},
      {"intermediate", x.intermediate},
      {"experts", x.experts},
      {"experts_per_token", x.experts_per_token},
      {"moe_intermediate", x.moe_intermediate},
      {"vocab", x.vocab},
      {"rms_eps", x.rms_eps},
      {"rope_theta", x.rope_theta},
      {"max_positions", x.max_positions},
      {"tied", x.tied},
      {"qk_norm", x.qk_norm},
      {"block_causal", x.block_causal},
      {"block_size", x.block_size},
      {"block_size_source", x.block_size_source},
      {"mask_token_id", x.mask_token_id},
      {"eos_token_ids", x.eos_token_ids},
      {"bos_token_id", x.bos_token_id ? nlohmann::ordered_json(*x.bos_token_id) : nlohmann::ordered_json(nullptr)},
      {"parameters", x.parameters},
      {"dtype", x.dtype},
      {"fp8_checkpoint", x.fp8_checkpoint},
      {"shards", x.shards},
      {"weights_ok", x.weights_ok()},
      {"problems", x.problems},
      {"unexpected", x.unexpected},
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
  const ModelInspection x = inspect_model(flags.require("--model"));
  if (flags.has("--json")) {
    print_json(x);
  } else {
    print_text(x);
  }
  return x.ok() ? 0 : 1;
}

}  // namespace jet::cli
