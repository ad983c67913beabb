// The expected tensors of a config (names from its architecture, model/architecture.h), their
// shapes, and checkpoint validation (FP8 projections included).
#include "model/weight_map.h"

#include <optional>
#include <unordered_set>

#include "core/error.h"
#include "model/architecture.h"
#include "model/fp8_weights.h"

namespace jet {
namespace {

constexpr const char* kExpertGate = "gate_proj.weight";
constexpr const char* kExpertUp = "up_proj.weight";
constexpr const char* kExpertDown = "down_proj.weight";

const NamingScheme& scheme(const ModelConfig& config) { return architecture_of(config.family).names; }

std::string layer_name(const NamingScheme& s, int64_t layer, const char* suffix) {
  return suffix ? str(s.layer_prefix, layer, ".", suffix) : std::string();
}

bool is_float(DType t) { return t == DType::BF16 || t == DType::F16 || t == DType::F32; }

void add(std::vector<ExpectedTensor>& out, const std::string& name, std::vector<int64_t> shape,
         bool projection = false) {
  if (!name.empty()) out.push_back({name, std::move(shape), projection});
}

constexpr bool kProjection = true;

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

ModelWeightNames model_weight_names(const ModelConfig& config) {
  const NamingScheme& s = scheme(config);
  return {s.embed, s.final_norm, config.tied ? s.embed : s.lm_head, config.tied ? s.lm_head : ""};
}

LayerWeightNames layer_weight_names(const ModelConfig& config, int64_t layer) {
  const NamingScheme& s = scheme(config);
  const bool moe = config.is_moe_layer(layer);
  auto name = [&](const char* suffix) { return layer_name(s, layer, suffix); };
  LayerWeightNames n;
  n.attn_norm = name(s.attn_norm);
  n.q_proj = name(s.q_proj);
  n.k_proj = name(s.k_proj);
  n.v_proj = name(s.v_proj);
  n.q_bias = name(s.q_bias);
  n.k_bias = name(s.k_bias);
  n.v_bias = name(s.v_bias);
  n.o_proj = name(s.o_proj);
  n.q_norm = name(s.q_norm);
  n.k_norm = name(s.k_norm);
  n.mlp_norm = name(s.mlp_norm);
  if (moe) {
    n.router = name(s.router);
    if (config.router_bias) n.router_bias = name(s.router_bias);
    if (config.shared_expert_intermediate > 0) {
      const std::string shared = name(s.shared_experts_infix);
      n.shared_gate = shared + kExpertGate;
      n.shared_up = shared + kExpertUp;
      n.shared_down = shared + kExpertDown;
    }
  } else {
    n.gate_proj = name(s.gate_proj);
    n.up_proj = name(s.up_proj);
    n.down_proj = name(s.down_proj);
  }
  return n;
}

ExpertWeightNames expert_weight_names(const ModelConfig& config, int64_t layer, int64_t expert) {
  const NamingScheme& s = scheme(config);
  JET_ASSERT(s.experts_infix && config.is_moe_layer(layer), "layer ", layer, " has no experts");
  const std::string prefix = str(s.layer_prefix, layer, ".", s.experts_infix, expert, ".");
  return {prefix + kExpertGate, prefix + kExpertUp, prefix + kExpertDown};
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) {
  const int64_t q_width = c.heads * c.head_dim;
  const int64_t kv_width = c.kv_heads * c.head_dim;
  const ModelWeightNames global = model_weight_names(c);
  std::vector<ExpectedTensor> out;
  add(out, global.embed, {c.vocab, c.hidden});
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    const LayerWeightNames n = layer_weight_names(c, layer);
    add(out, n.attn_norm, {c.hidden});
    add(out, n.q_proj, {n.k_proj.empty() ? q_width + 2 * kv_width : q_width, c.hidden}, kProjection);
    add(out, n.k_proj, {kv_width, c.hidden}, kProjection);
    add(out, n.v_proj, {kv_width, c.hidden}, kProjection);
    add(out, n.q_bias, {q_width});
    add(out, n.k_bias, {kv_width});
    add(out, n.v_bias, {kv_width});
    add(out, n.o_proj, {c.hidden, q_width}, kProjection);
    add(out, n.q_norm, {c.head_dim});
    add(out, n.k_norm, {c.head_dim});
    add(out, n.mlp_norm, {c.hidden});
    add(out, n.gate_proj, {c.intermediate, c.hidden}, kProjection);
    add(out, n.up_proj, {c.intermediate, c.hidden}, kProjection);
    add(out, n.down_proj, {c.hidden, c.intermediate}, kProjection);
    add(out, n.router, {c.num_experts, c.hidden});
    add(out, n.router_bias, {c.num_experts});
    add(out, n.shared_gate, {c.shared_expert_intermediate, c.hidden}, kProjection);
    add(out, n.shared_up, {c.shared_expert_intermediate, c.hidden}, kProjection);
    add(out, n.shared_down, {c.hidden, c.shared_expert_intermediate}, kProjection);
    if (!c.is_moe_layer(layer)) continue;
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const ExpertWeightNames x = expert_weight_names(c, layer, e);
      add(out, x.gate_proj, {c.moe_intermediate, c.hidden}, kProjection);
      add(out, x.up_proj, {c.moe_intermediate, c.hidden}, kProjection);
      add(out, x.down_proj, {c.hidden, c.moe_intermediate}, kProjection);
    }
  }
  add(out, global.final_norm, {c.hidden});
  if (!c.tied) add(out, global.lm_head, {c.vocab, c.hidden});
  return out;
}

std::vector<std::vector<std::string>> projection_stacks(const ModelConfig& c) {
  std::vector<std::vector<std::string>> stacks;
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    const LayerWeightNames n = layer_weight_names(c, layer);
    stacks.push_back(n.k_proj.empty() ? std::vector<std::string>{n.q_proj}
                                      : std::vector<std::string>{n.q_proj, n.k_proj, n.v_proj});
    stacks.push_back({n.o_proj});
    if (!c.is_moe_layer(layer)) {
      stacks.push_back({n.gate_proj, n.up_proj});
      stacks.push_back({n.down_proj});
      continue;
    }
    std::vector<std::string> gate_up, down;
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const ExpertWeightNames x = expert_weight_names(c, layer, e);
      gate_up.insert(gate_up.end(), {x.gate_proj, x.up_proj});
      down.push_back(x.down_proj);
    }
    stacks.push_back(std::move(gate_up));
    stacks.push_back(std::move(down));
    if (!n.shared_down.empty()) {
      stacks.push_back({n.shared_gate, n.shared_up});
      stacks.push_back({n.shared_down});
    }
  }
  return stacks;
}

namespace {

// An e4m3 tensor: only a projection of an FP8 checkpoint, with a scale of a known layout.
void check_fp8_tensor(const ModelConfig& config, const TensorSource& source, const ExpectedTensor& want,
                      WeightReport& report, std::unordered_set<std::string>& expected_names) {
  if (!want.projection) {
    report.problems.push_back(str("tensor '", want.name,
                                  "' is F8_E4M3, but only projections may be FP8 (embeddings, norms, routers "
                                  "and the LM head are read as BF16, F16 or F32)"));
    return;
  }
  if (!config.fp8_checkpoint) {
    report.problems.push_back(
        str("tensor '", want.name, "' is F8_E4M3, but config.json has no quantization_config of an FP8 format"));
    return;
  }
  std::string problem;
  const Fp8Scale scale = find_fp8_scale(source, want.name, want.shape[0], want.shape[1], problem);
  if (scale.tensor) {
    expected_names.insert(scale.tensor->name);
  } else {
    report.problems.push_back(problem);
  }
}

// The tensors of one stack load as one Linear: all FP8 with scales of one layout, or none FP8.
// Block scales stack only when each part but the last fills whole 128-row blocks.
void check_stack(const TensorSource& source, const std::vector<std::string>& stack, WeightReport& report) {
  std::vector<const TensorInfo*> parts;
  for (const std::string& name : stack) {
    const TensorInfo* t = source.find(name);
    if (!t || t->shape.size() != 2) return;  // reported already
    parts.push_back(t);
  }
  int fp8 = 0;
  for (const TensorInfo* t : parts) fp8 += t->dtype == DType::F8E4M3;
  if (fp8 == 0) return;
  if (fp8 != static_cast<int>(parts.size())) {
    report.problems.push_back(str("tensors '", stack.front(), "' .. '", stack.back(),
                                  "' run as one product, so they must all be F8_E4M3 or all not; some are"));
    return;
  }
  std::string problem;
  std::optional<Fp8Scaling> scaling;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Fp8Scale scale = find_fp8_scale(source, parts[i]->name, parts[i]->shape[0], parts[i]->shape[1], problem);
    if (!scale.tensor) return;  // reported already
    if (scaling && *scaling != scale.scaling) {
      report.problems.push_back(str("tensors '", stack.front(), "' .. '", stack.back(),
                                    "' run as one product, so their scales must share a layout; '", parts[i]->name,
                                    "' differs"));
      return;
    }
    scaling = scale.scaling;
    if (scale.scaling == Fp8Scaling::Block128 && i + 1 < parts.size() && parts[i]->shape[0] % 128 != 0) {
      report.problems.push_back(str("tensor '", parts[i]->name, "' has ", parts[i]->shape[0],
                                    " rows, not a multiple of 128, so its 128x128 block scales cannot be stacked "
                                    "with '",
                                    stack[i + 1], "'"));
      return;
    }
  }
}

}  // namespace

WeightReport validate_weights(const ModelConfig& config, const TensorSource& source) {
  WeightReport report;
  std::unordered_set<std::string> expected_names;
  for (const ExpectedTensor& want : expected_tensors(config)) {
    expected_names.insert(want.name);
    const TensorInfo* have = source.find(want.name);
    if (!have) {
      report.problems.push_back(
          str("missing tensor '", want.name, "' (expected shape ", shape_string(want.shape), ")"));
      continue;
    }
    if (have->shape != want.shape) {
      report.problems.push_back(str("tensor '", want.name, "' has shape ", shape_string(have->shape), ", expected ",
                                    shape_string(want.shape)));
    } else if (have->dtype == DType::F8E4M3) {
      check_fp8_tensor(config, source, want, report, expected_names);
    }
    if (!is_float(have->dtype) && have->dtype != DType::F8E4M3) {
      report.problems.push_back(str("tensor '", want.name, "' has dtype ", dtype_name(have->dtype),
                                    ", expected a float dtype (BF16, F16 or F32",
                                    want.projection ? ", or F8_E4M3 with a scale)" : ")"));
    }
  }
  if (config.fp8_checkpoint) {
    for (const std::vector<std::string>& stack : projection_stacks(config)) check_stack(source, stack, report);
  }
  for (const std::string& name : source.names()) {
    if (!expected_names.count(name)) report.unexpected.push_back(name);
  }
  return report;
}

void require_valid_weights(const ModelConfig& config, const TensorSource& source) {
  const WeightReport report = validate_weights(config, source);
  if (report.ok()) return;
  // A wrong config can make every tensor mismatch; the first few problems tell the story.
  constexpr size_t kMaxListed = 10;
  std::string message = str(source.description(), ": weights do not match config.json (", report.problems.size(),
                            " problem", report.problems.size() == 1 ? "" : "s", ")");
  for (size_t i = 0; i < report.problems.size() && i < kMaxListed; ++i) message += "\n  " + report.problems[i];
  if (report.problems.size() > kMaxListed) message += str("\n  ... and ", report.problems.size() - kMaxListed, " more");
  throw Error(message);
}

}  // namespace jet
