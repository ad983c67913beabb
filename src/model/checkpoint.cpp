// Checkpoint: shard discovery, the index's consistency checks, and lookups across shards.
#include "model/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "core/json_object.h"

namespace jet {
namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kSingleFile = "model.safetensors";

std::vector<std::string> safetensors_in(const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (it->is_regular_file(error) && it->path().extension() == ".safetensors") paths.push_back(it->path());
  }
  JET_CHECK(!error, "cannot list ", dir, ": ", error.message());
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::string shard_name(const SafetensorsFile& shard) { return fs::path(shard.path()).filename().string(); }

// weight_map of the index: tensor name -> shard file name.
std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
  JsonObject index = JsonObject::from_file(index_path);
  JET_CHECK(index.has("weight_map"), index_path, ": missing required key 'weight_map'");
  JsonObject map(index.json().at("weight_map"), index_path + " weight_map");
  std::map<std::string, std::string> out;
  for (const auto& [tensor, shard] : map.json().items()) {
    JET_CHECK(shard.is_string(), index_path, ": weight_map entry '", tensor, "' must be a shard file name, got ",
              json_type_name(shard));
    const auto& file = shard.get_ref<const std::string&>();
    // Shards live next to the index; a path could reach outside the model directory.
    JET_CHECK(!file.empty() && file.find('/') == std::string::npos && file != "..", index_path, ": weight_map entry '",
              tensor, "' names '", file, "', which is not a file name in the directory");
    out.emplace(tensor, file);
  }
  return out;
}

}  // namespace

Checkpoint::Checkpoint(const std::string& model_dir) : dir_(model_dir) {
  JET_CHECK(fs::is_directory(dir_), "model directory ", dir_, " does not exist or is not a directory");
  const fs::path dir(dir_);
  if (fs::exists(dir / kIndexFile)) {
    load_index(dir / kIndexFile);
  } else if (fs::exists(dir / kSingleFile)) {
    add_shard(dir / kSingleFile);
  } else {
    for (const auto& path : safetensors_in(dir_)) add_shard(path);
  }
  JET_CHECK(!shards_.empty(), dir_, ": ",
            fs::exists(dir / kIndexFile) ? str(kIndexFile, " lists no tensors")
                                         : str("no ", kIndexFile, ", ", kSingleFile, " or other *.safetensors file"));
  JET_CHECK(!tensors_.empty(), dir_, ": the checkpoint holds no tensors");
}

void Checkpoint::add_shard(const std::string& path) {
  shards_.push_back(std::make_unique<SafetensorsFile>(path));
  const SafetensorsFile* shard = shards_.back().get();
  for (const TensorInfo& t : shard->tensors()) {
    auto [it, inserted] = tensors_.emplace(t.name, Located{&t, shard});
    JET_CHECK(inserted, dir_, ": tensor '", t.name, "' is in two shards, ", shard_name(*it->second.shard), " and ",
              shard_name(*shard));
  }
}

void Checkpoint::load_index(const std::string& index_path) {
  const std::map<std::string, std::string> weight_map = read_weight_map(index_path);
  std::set<std::string> files;
  for (const auto& [tensor, file] : weight_map) {
    JET_CHECK(fs::is_regular_file(fs::path(dir_) / file), index_path, ": shard '", file, "' listed for tensor '",
              tensor, "' does not exist in ", dir_);
    files.insert(file);
  }
  for (const auto& file : files) add_shard(fs::path(dir_) / file);

  for (const auto& [tensor, file] : weight_map) {
    auto it = tensors_.find(tensor);
    JET_CHECK(it != tensors_.end(), index_path, ": tensor '", tensor, "' is listed in shard '", file,
              "' but that shard does not contain it");
    const std::string holder = shard_name(*it->second.shard);
    JET_CHECK(holder == file, index_path, ": tensor '", tensor, "' is listed in shard '", file, "' but found in '",
              holder, "'");
  }
  for (const auto& [name, located] : tensors_) {
    JET_CHECK(weight_map.count(name), index_path, ": tensor '", name,
              "' is in a shard but missing from the index's weight_map");
  }
}

const TensorInfo* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second.info;
}

const TensorInfo& Checkpoint::get(const std::string& name) const {
  const TensorInfo* t = find(name);
  JET_CHECK(t, dir_, ": checkpoint has no tensor named '", name, "'");
  return *t;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, located] : tensors_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t Checkpoint::parameter_count() const {
  int64_t total = 0;
  for (const auto& [name, located] : tensors_) total += located.info->numel();
  return total;
}

DType Checkpoint::dominant_dtype() const {
  std::map<DType, int64_t> elements;
  for (const auto& [name, located] : tensors_) elements[located.info->dtype] += located.info->numel();
  return std::max_element(elements.begin(), elements.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

}  // namespace jet
