// RandomWeights: every expected tensor (weight_map.h) filled from a counter-based generator.
#include "model/random_weights.h"

#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/host_memory.h"
#include "model/weight_map.h"

namespace jet {

namespace {

constexpr float kLogitStd = 2.0f;    // tools/make_tiny_model.py's LOGIT_STD
constexpr float kNormNoise = 0.05f;  // and its NORM_NOISE

// splitmix64 of (seed, tensor, element): independent of thread count and order.
uint64_t mix(uint64_t x) { return mix64(x + 0x9e3779b97f4a7c15ull); }

// Uniform on [-sqrt(3), sqrt(3)): mean 0, variance 1.
float unit_uniform(uint64_t seed, uint64_t tensor, uint64_t i) {
  const uint64_t bits = mix(seed ^ mix(tensor ^ mix(i)));
  const float u = static_cast<float>(bits >> 40) * 0x1.0p-24f;  // [0, 1)
  return (2.0f * u - 1.0f) * 1.7320508f;
}

}  // namespace

RandomWeights::RandomWeights(const ModelConfig& config, uint64_t seed)
    : tensors_("random weights (load_format dummy)") {
  const ModelWeightNames names = model_weight_names(config);
  const std::vector<ExpectedTensor> expected = expected_tensors(config);
  size_t bytes = 0;
  for (const ExpectedTensor& t : expected) bytes += static_cast<size_t>(t.numel()) * sizeof(uint16_t);
  const size_t available = host_memory_available();
  JET_CHECK(available == 0 || bytes <= available, "random weights (load_format dummy): this model's ", bytes >> 20,
            " MiB of bf16 are made in host memory, more than the ", available >> 20, " MiB available");
  storage_.resize(expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    const ExpectedTensor& t = expected[k];
    const int64_t n = t.numel();
    const bool is_bias = t.name.ends_with(".bias");
    const bool is_norm = t.shape.size() == 1 && !is_bias;
    const float fan_in = static_cast<float>(t.shape.back());
    const float scale = is_norm || is_bias        ? kNormNoise
                        : t.name == names.embed   ? 1.0f
                        : t.name == names.lm_head ? kLogitStd / std::sqrt(fan_in)
                                                  : 1.0f / std::sqrt(fan_in);
    const float offset = is_norm ? 1.0f : 0.0f;
    storage_[k] = std::make_unique_for_overwrite<uint16_t[]>(static_cast<size_t>(n));
    uint16_t* data = storage_[k].get();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) data[i] = f32_to_bf16(offset + scale * unit_uniform(seed, k, i));
    tensors_.add(TensorInfo{t.name, DType::BF16, t.shape, data, static_cast<size_t>(n) * sizeof(uint16_t)});
  }
}

}  // namespace jet
