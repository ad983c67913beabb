// Implementation of the model test helpers (see model_test_util.h).
#include "model_test_util.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "model/safetensors.h"

namespace jet::test {
namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "jet_model_test_XXXXXX").string();
  JET_ASSERT(::mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

::testing::AssertionResult make_tiny_model(const std::string& arch, const fs::path& dir, int seed,
                                           const std::string& extra_args) {
  const std::string command = str("/usr/bin/python3 ", JET_REPO_DIR, "/tools/make_tiny_model.py --arch ", arch,
                                  " --out ", dir.string(), " --seed ", seed, " ", extra_args);
  if (std::system(command.c_str()) != 0) return ::testing::AssertionFailure() << "failed: " << command;
  return ::testing::AssertionSuccess();
}

std::string safetensors_image(const std::string& header, const std::string& data, int64_t declared_length) {
  uint64_t length = declared_length >= 0 ? static_cast<uint64_t>(declared_length) : header.size();
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>(length >> (8 * i) & 0xff);
  return out + header + data;
}

std::string safetensors_image(const std::vector<RawTensor>& tensors) {
  Json header = Json::object();
  std::string data;
  for (const RawTensor& t : tensors) {
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return safetensors_image(text, data);
}

std::vector<RawTensor> read_raw_tensors(const std::string& path) {
  SafetensorsFile file(path);
  std::vector<RawTensor> out;
  for (const TensorInfo& t : file.tensors()) {
    out.push_back(
        {t.name, std::string(dtype_name(t.dtype)), t.shape, std::string(static_cast<const char*>(t.data), t.nbytes)});
  }
  return out;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  JET_ASSERT(out.good(), "cannot write test file");
}

Json read_json(const std::string& path) {
  std::ifstream in(path);
  return Json::parse(in);
}

void write_json(const std::string& path, const Json& value) { write_file(path, value.dump(2)); }

ModelConfig config_from_json(const Json& config, const std::optional<Json>& generation) {
  TempDir dir;
  write_json(dir.file("config.json"), config);
  if (generation) write_json(dir.file("generation_config.json"), *generation);
  return load_model_config(dir.path().string());
}

}  // namespace jet::test
