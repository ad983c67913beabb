// Implementation of engine_test_util.h.
#include "engine_test_util.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace jet::test {
namespace fs = std::filesystem;

namespace {

// The folders this process made, removed at exit.
struct OwnedFolders {
  std::vector<fs::path> paths;
  ~OwnedFolders() {
    std::error_code ignored;
    for (const fs::path& p : paths) fs::remove_all(p, ignored);
  }
};

OwnedFolders& owned() {
  static OwnedFolders folders;
  return folders;
}

}  // namespace

std::string tiny_model_folder(const std::string& args) {
  std::string pattern = (fs::temp_directory_path() / "jet_engine_test_XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed for " << pattern;
    return pattern;
  }
  owned().paths.push_back(pattern);
  const std::string cmd = std::string("/usr/bin/python3 ") + JET_REPO_DIR + "/tools/make_tiny_model.py " + args +
                          " --out " + pattern + " > /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return pattern;
}

EngineOptions cpu_options(const std::string& dir) {
  EngineOptions o;
  o.model = dir;
  o.device = "cpu";
  return o;
}

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

std::vector<GenerationOutput> greedy_decode(Engine& engine, int max_tokens) {
  return engine.generate({std::vector<int32_t>{5, 6, 7, 8, 9, 10}, std::vector<int32_t>{11, 12, 13}},
                         {greedy(max_tokens)});
}

std::vector<WeightView> checkpoint_views(const Checkpoint& ckpt) {
  std::vector<WeightView> views;
  for (const std::string& name : ckpt.names()) {
    const TensorInfo& t = ckpt.get(name);
    EXPECT_EQ(t.dtype, DType::BF16);
    views.push_back({name, WeightView::DType::BF16, t.shape, t.data});
  }
  return views;
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

}  // namespace jet::test
