// Scale tensors of FP8 checkpoint weights (fp8_weights.h).
#include "model/fp8_weights.h"

#include <cmath>

#include "core/error.h"
#include "model/weight_map.h"

namespace jet {

namespace {

// "<module>.weight" -> "<module>.<suffix>".
std::string sibling(const std::string& weight_name, const char* suffix) {
  const std::string base = weight_name.substr(0, weight_name.rfind('.') + 1);
  return base + suffix;
}

}  // namespace

Fp8Scale find_fp8_scale(const TensorSource& source, const std::string& weight_name, int64_t rows, int64_t cols,
                        std::string& problem) {
  const std::string inv_name = sibling(weight_name, "weight_scale_inv"), name = sibling(weight_name, "weight_scale");
  const TensorInfo* inv = source.find(inv_name);
  const TensorInfo* plain = source.find(name);
  if (!inv && !plain) {
    problem = str("tensor '", weight_name, "' is F8_E4M3 but has no scale ('", inv_name, "' or '", name, "')");
    return {};
  }
  if (inv && plain) {
    problem = str("tensor '", weight_name, "' has two scales, '", inv_name, "' and '", name, "'");
    return {};
  }
  const TensorInfo& t = inv ? *inv : *plain;
  if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16) {
    problem = str("FP8 scale '", t.name, "' has dtype ", dtype_name(t.dtype), ", expected F32, BF16 or F16");
    return {};
  }
  const std::vector<int64_t>& s = t.shape;
  if (inv) {
    const std::vector<int64_t> blocks = {(rows + 127) / 128, (cols + 127) / 128};
    if (s == blocks) return {inv, Fp8Scaling::Block128};
    problem = str("FP8 scale '", t.name, "' has shape ", shape_string(s), ", expected ", shape_string(blocks),
                  " (128x128 blocks of the weight's ", shape_string({rows, cols}), ")");
    return {};
  }
  const bool per_tensor = s.empty() || s == std::vector<int64_t>{1};
  const bool per_channel = s == std::vector<int64_t>{rows} || s == std::vector<int64_t>{rows, 1};
  if (per_tensor || per_channel) return {plain, Fp8Scaling::PerChannel};
  problem = str("FP8 scale '", t.name, "' has shape ", shape_string(s), ", expected [] or [1] (per tensor), or [", rows,
                "] or [", rows, ", 1] (per output channel)");
  return {};
}

void read_fp8_scale(const Fp8Scale& scale, int64_t rows, int64_t cols, float* out) {
  const TensorInfo& t = *scale.tensor;
  const int64_t count = fp8_scale_count(scale.scaling, rows, cols);
  std::vector<float> values(static_cast<size_t>(t.numel()));
  convert_to_f32(t.dtype, t.data, values.data(), values.size());
  for (float v : values) {
    JET_CHECK(std::isfinite(v) && v >= 0.0f, "FP8 scale '", t.name, "' holds ", v, "; scales must be finite and >= 0");
  }
  for (int64_t i = 0; i < count; ++i) out[i] = values.size() == 1 ? values[0] : values[i];
}

}  // namespace jet
