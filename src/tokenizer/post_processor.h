// The tokenizer.json "post_processor": what encode(text, add_special_tokens = true) adds around
// the ids. ByteLevel adds nothing (Qwen3); TemplateProcessing adds its special tokens (BOS/EOS);
// a Sequence applies its processors in order.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace jet::tokenizer {

class PostProcessor {
 public:
  // `spec` is the value of tokenizer.json's "post_processor" (null adds nothing).
  static PostProcessor from_json(const nlohmann::json& spec);

  // Wraps the ids of one sequence in the template's special tokens.
  void apply(std::vector<int32_t>& ids) const;

 private:
  void add_from_json(const nlohmann::json& spec, const std::string& where);
  void add_template(const nlohmann::json& spec, const std::string& where);

  std::vector<int32_t> prefix_;
  std::vector<int32_t> suffix_;
};

}  // namespace jet::tokenizer
