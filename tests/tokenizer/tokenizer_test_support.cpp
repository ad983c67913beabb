// Implementation of the tokenizer test helpers.
#include "tokenizer_test_support.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "tokenizer/byte_level.h"

namespace jet::test {
namespace fs = std::filesystem;

std::string repo_path(const std::string& relative) { return std::string(JET_REPO_DIR) + "/" + relative; }
std::string qwen3_dir() { return repo_path("models/qwen3-tokenizer"); }

const Tokenizer& qwen3() {
  static const Tokenizer tokenizer = Tokenizer::from_dir(qwen3_dir());
  return tokenizer;
}

std::vector<nlohmann::json> read_cases(const std::string& name) {
  std::ifstream in(repo_path("tests/data/tokenizer/" + name));
  if (!in) throw std::runtime_error("cannot open test vectors " + name);
  std::vector<nlohmann::json> cases;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) cases.push_back(nlohmann::json::parse(line));
  }
  return cases;
}

nlohmann::json tiny_tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::encode(std::string(1, static_cast<char>(b)))] = b;
  nlohmann::json merge_list = nlohmann::json::array();
  int next_id = 256;
  for (const auto& [left, right] : merges) {
    const std::string merged = byte_level::encode(left + right);
    if (!vocab.contains(merged)) vocab[merged] = next_id++;
    merge_list.push_back({byte_level::encode(left), byte_level::encode(right)});
  }
  return {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}},
  };
}

namespace {

// The folders this test process made, removed when it exits (each test runs as its own process,
// so they would otherwise pile up in the temporary directory, one per test and run).
class TempFolders {
 public:
  ~TempFolders() {
    std::error_code ignored;
    for (const fs::path& p : paths_) fs::remove_all(p, ignored);
  }
  void add(const fs::path& p) {
    const std::lock_guard<std::mutex> lock(mutex_);
    paths_.push_back(p);
  }

 private:
  std::mutex mutex_;
  std::vector<fs::path> paths_;
};

TempFolders& temp_folders() {
  static TempFolders folders;
  return folders;
}

}  // namespace

std::string write_temp_file(const std::string& name, const std::string& content) {
  static std::atomic<int> counter{0};
  const fs::path dir = fs::temp_directory_path() /
                       ("jet_tokenizer_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::create_directories(dir);
  temp_folders().add(dir);
  const fs::path path = dir / name;
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

std::string write_temp_dir(const nlohmann::json& tokenizer_json, const nlohmann::json& config) {
  const fs::path dir = fs::path(write_temp_file("tokenizer.json", tokenizer_json.dump())).parent_path();
  if (!config.is_null()) std::ofstream(dir / "tokenizer_config.json") << config.dump();
  return dir.string();
}

std::vector<int32_t> byte_ids(const std::string& text) {
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

}  // namespace jet::test
