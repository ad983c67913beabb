// Character classes the tokenizer needs with the exact meaning HF tokenizers gives them.
#pragma once

#include <span>

namespace jet::unicode {

// The Unicode White_Space property (25 code points): what Rust's char::is_whitespace and
// Oniguruma's \s accept. PCRE2's \s differs (it also takes U+180E), so regexes are rewritten
// to use this list (see regex.h).
std::span<const char32_t> white_space_code_points();
bool is_white_space(char32_t code_point);

// A "word" character for added tokens with single_word: the Unicode \w class (letters, marks,
// decimal and letter numbers, connector punctuation, joiners), judged by general category.
bool is_word_character(char32_t code_point);

// True when the code point can never change under NFC nor make its neighbours change: no
// canonical decomposition, combining class 0, and not the second character of any composition. A text
// made only of such characters is already in NFC (the NFC quick-check "yes" case), so the
// normaliser can skip it. Conservative: some stable characters answer false.
bool is_nfc_inert(char32_t code_point);

}  // namespace jet::unicode
