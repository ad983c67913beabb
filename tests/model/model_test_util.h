// Helpers for the model tests: temporary directories, tiny models made by
// tools/make_tiny_model.py, hand-built (possibly broken) safetensors files, configs from JSON, and
// an assertion that a call throws jet::Error with a message containing given fragments.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/model_config.h"

namespace jet::test {

using Json = nlohmann::json;

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Runs tools/make_tiny_model.py --arch <arch> --out <dir> --seed <seed> <extra_args>.
// Use as ASSERT_TRUE(make_tiny_model(...)).
::testing::AssertionResult make_tiny_model(const std::string& arch, const std::filesystem::path& dir, int seed = 1,
                                           const std::string& extra_args = "");

// One tensor of a hand-built safetensors file: `bytes` are its data, `dtype` its format name.
struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// A safetensors image: 8-byte little-endian length of `header` (or `declared_length` when given),
// the header text, then `data`.
std::string safetensors_image(const std::string& header, const std::string& data, int64_t declared_length = -1);

// A well-formed image holding `tensors` back to back, header padded to 8 bytes like real writers.
std::string safetensors_image(const std::vector<RawTensor>& tensors);

// Reads every tensor of a safetensors file back into RawTensors (to edit and rewrite it).
std::vector<RawTensor> read_raw_tensors(const std::string& path);

void write_file(const std::string& path, const std::string& bytes);
Json read_json(const std::string& path);
void write_json(const std::string& path, const Json& value);

// The ModelConfig of a folder holding `config` as config.json (and `generation` as
// generation_config.json when given).
ModelConfig config_from_json(const Json& config, const std::optional<Json>& generation = std::nullopt);

// Calls `f`, expecting a jet::Error whose message contains every fragment.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos) << "message: " << message << "\nlacks: " << fragment;
    }
    return;
  }
  ADD_FAILURE() << "expected a jet::Error";
}

}  // namespace jet::test
