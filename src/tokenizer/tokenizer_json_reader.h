// Reads tokenizer.json in one streaming (SAX) pass. model.vocab and model.merges (about 300K
// entries for Qwen3) go straight into flat vectors instead of a JSON tree, which makes loading
// about three times faster; everything else becomes an ordinary nlohmann::json.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jet::tokenizer {

// model.vocab and model.merges as written in the file.
struct BpeTables {
  bool has_vocab = false;   // model.vocab was an object (else it is left in the tree, if present)
  bool has_merges = false;  // model.merges was an array (else it is left in the tree, if present)
  std::vector<std::pair<std::string, int32_t>> vocab;       // (token, id) in file order
  std::vector<std::pair<std::string, std::string>> merges;  // (left, right) in rank order
};

struct TokenizerJson {
  nlohmann::json root;  // the whole file except the captured model.vocab / model.merges
  BpeTables bpe;
};

// Parses `text`; throws jet::Error for malformed JSON (with line and column) and for vocab or
// merges entries of the wrong shape (naming the entry).
TokenizerJson read_tokenizer_json(std::string_view text);

}  // namespace jet::tokenizer
