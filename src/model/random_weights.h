// Random weights with a model's exact names and shapes, for benchmarks without a checkpoint
// (EngineOptions::load_format = "dummy", as in vLLM): deterministic for a seed, bf16, scaled as
// tools/make_tiny_model.py scales its random models so activations stay O(1) (norms near 1, a
// unit-variance embedding, projections of variance 1/fan_in, an untied LM head giving logits of
// standard deviation 2). Values are uniform, not Gaussian: a benchmark needs the shapes and the
// scales, not the distribution, and a counter-based generator fills 8 GB in parallel in seconds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/tensor_source.h"

namespace jet {

class RandomWeights final : public TensorSource {
 public:
  RandomWeights(const ModelConfig& config, uint64_t seed);

  const TensorInfo* find(const std::string& name) const override { return tensors_.find(name); }
  std::vector<std::string> names() const override { return tensors_.names(); }
  std::string description() const override { return tensors_.description(); }

 private:
  // bf16 bits, one array per tensor: uninitialised until filled, so the threads that fill it
  // also fault its pages in.
  std::vector<std::unique_ptr<uint16_t[]>> storage_;
  TensorMap tensors_;
};

}  // namespace jet
