// The tokenizer.json "normalizer": Unicode normalisation forms (NFC, NFD, NFKC, NFKD), a
// Sequence of them, or null. Other HF normalizer types are rejected with an error naming them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace jet::tokenizer {

class Normalizer {
 public:
  enum class Form { NFC, NFD, NFKC, NFKD };

  // `spec` is the value of tokenizer.json's "normalizer" (null means no normalisation).
  static Normalizer from_json(const nlohmann::json& spec);

  // Normalises valid UTF-8 `text`. Returns a view of `text` itself when nothing can change,
  // otherwise of `scratch`, which receives the result.
  std::string_view apply(std::string_view text, std::string& scratch) const;

 private:
  void add_from_json(const nlohmann::json& spec, const std::string& where);
  std::vector<Form> forms_;
};

}  // namespace jet::tokenizer
