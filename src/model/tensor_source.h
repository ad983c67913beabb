// TensorSource: where a model's weights come from by HuggingFace name — a checkpoint on disk, or
// tensors handed over in memory (the RL weight APIs). Validation and loading take either.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/safetensors.h"

namespace jet {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual const TensorInfo* find(const std::string& name) const = 0;  // nullptr when absent
  virtual std::vector<std::string> names() const = 0;                 // sorted
  virtual std::string description() const = 0;                        // names the source in errors
};

// Tensors in caller memory, by name.
class TensorMap final : public TensorSource {
 public:
  explicit TensorMap(std::string description) : description_(std::move(description)) {}

  void add(TensorInfo info) {
    const std::string name = info.name;
    JET_CHECK(tensors_.emplace(name, std::move(info)).second, description_, ": tensor '", name, "' given twice");
  }
  const TensorInfo* find(const std::string& name) const override {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [name, info] : tensors_) out.push_back(name);
    return out;
  }
  std::string description() const override { return description_; }

 private:
  std::string description_;
  std::map<std::string, TensorInfo> tensors_;
};

}  // namespace jet
