// Shared helpers for the tokenizer tests: paths, the Qwen3 tokenizer (loaded once), JSONL test
// vectors, and small synthetic tokenizer.json files for testing single features.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "jet/tokenizer.h"

namespace jet::test {

std::string repo_path(const std::string& relative);  // JET_REPO_DIR/relative
std::string qwen3_dir();                             // models/qwen3-tokenizer

// The Qwen3 tokenizer from qwen3_dir(), loaded once for all tests.
const Tokenizer& qwen3();

// Every line of tests/data/tokenizer/<name> as JSON.
std::vector<nlohmann::json> read_cases(const std::string& name);

// A minimal valid byte-level BPE tokenizer.json: id b is the symbol of byte b (0..255), then
// one id per merge, in order, for the merged token. Tests change fields to probe one feature.
nlohmann::json tiny_tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges = {});

// Writes `content` to a fresh file in a temporary folder and returns its path. The folders are
// removed when the test process exits.
std::string write_temp_file(const std::string& name, const std::string& content);
// Writes tokenizer.json (and tokenizer_config.json unless null) into a fresh folder.
std::string write_temp_dir(const nlohmann::json& tokenizer_json, const nlohmann::json& config);

// The ids of the bytes of `text` in tiny_tokenizer_json (id = byte value).
std::vector<int32_t> byte_ids(const std::string& text);

}  // namespace jet::test
