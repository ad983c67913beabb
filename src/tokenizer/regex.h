// The pre-tokenizer's regular expressions: PCRE2 in UTF + UCP mode with JIT, with HF's
// (Oniguruma's) meaning of \s and \S restored by rewriting them to the White_Space class.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace jet::tokenizer {

// Rewrites \s and \S outside character classes to [WS] / [^WS] and \s inside a class to the
// WS list, where WS is the Unicode White_Space set. (PCRE2's \s also matches U+180E; \S inside
// a class is left as it is: no known tokenizer uses it.)
std::string rewrite_white_space_classes(std::string_view pattern);

class Regex {
 public:
  enum class Syntax { PATTERN, LITERAL };

  // Compiles `pattern` (after rewrite_white_space_classes for PATTERN); throws jet::Error with
  // PCRE2's message and the offset on a bad pattern.
  Regex(std::string_view pattern, Syntax syntax);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  struct Match {
    size_t start, end;
  };

  // Finds the first non-empty match in text[from..] of valid UTF-8 `text`; false if none.
  // Thread-safe: matching state is per thread.
  bool find(std::string_view text, size_t from, Match& match) const;

 private:
  struct Code;
  std::unique_ptr<Code> code_;
};

}  // namespace jet::tokenizer
