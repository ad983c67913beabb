// The tensors of a HuggingFace model directory, possibly sharded over several .safetensors files.
//
// Shards are found in this order: model.safetensors.index.json (its weight_map, validated against
// the shards), else model.safetensors, else every *.safetensors in the directory (sorted by name).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/safetensors.h"
#include "model/tensor_source.h"

namespace jet {

class Checkpoint final : public TensorSource {
 public:
  explicit Checkpoint(const std::string& model_dir);  // maps and validates every shard

  const std::string& dir() const { return dir_; }
  const TensorInfo* find(const std::string& name) const override;  // nullptr when absent
  const TensorInfo& get(const std::string& name) const;            // throws naming the tensor and the directory
  std::vector<std::string> names() const override;                 // sorted
  std::string description() const override { return dir_; }
  size_t shard_count() const { return shards_.size(); }

  int64_t parameter_count() const;  // elements over all tensors
  DType dominant_dtype() const;     // the dtype holding the most elements

 private:
  void add_shard(const std::string& path);
  void load_index(const std::string& index_path);

  struct Located {
    const TensorInfo* info;
    const SafetensorsFile* shard;
  };

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::unordered_map<std::string, Located> tensors_;
};

}  // namespace jet
