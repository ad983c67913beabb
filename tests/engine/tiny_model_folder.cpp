// Implementation of tiny_model_folder.h.
#include "tiny_model_folder.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

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

}  // namespace jet::test
