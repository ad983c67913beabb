// The tokenizer.json "pre_tokenizer": cuts normalised text into pieces that BPE encodes one by
// one. Supported: Split (regex or literal, behavior Isolated), ByteLevel (add_prefix_space,
// use_regex with the GPT-2 pattern), and Sequence of those, with ByteLevel as the last step
// (this engine does byte-level BPE only). The byte-to-symbol mapping itself happens in BPE.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace jet::tokenizer {

class PreTokenizer {
 public:
  // `spec` is the value of tokenizer.json's "pre_tokenizer".
  static PreTokenizer from_json(const nlohmann::json& spec);

  using PieceSink = std::function<void(std::string_view piece)>;

  // Calls `sink` with each non-empty piece of `text` (valid UTF-8), in order.
  void for_each_piece(std::string_view text, const PieceSink& sink) const;

  // The pieces as strings (for tests and tools).
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Step {
    bool add_prefix_space = false;  // ByteLevel: prepend ' ' unless the piece starts with one
    std::optional<Regex> regex;     // cut into matches and the gaps between them
  };

  void add_from_json(const nlohmann::json& spec, const std::string& where);
  void run_step(size_t index, std::string_view piece, const PieceSink& sink) const;

  std::vector<Step> steps_;
  bool has_byte_level_ = false;
};

}  // namespace jet::tokenizer
