// UTF-8 helpers (the tokenizer's and the server's): one-sequence decoding with the Unicode
// "maximal subpart" rule, validation (with the offset of the first bad byte), lossy decoding (U+FFFD per maximal
// invalid subsequence, as Rust's from_utf8_lossy and so HF tokenizers do) and encoding.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace jet::utf8 {

// What sits at one position of a byte string.
struct Sequence {
  enum class Kind {
    CHARACTER,  // a complete, valid character of `length` bytes
    INVALID,    // a maximal invalid subpart of `length` bytes (>= 1): becomes one U+FFFD
    TRUNCATED,  // the input ends inside a sequence that was valid so far (`length` bytes)
  };
  Kind kind;
  size_t length;
  char32_t code_point;  // only meaningful for CHARACTER
};

// Decodes the sequence starting at text[pos] (pos < text.size()).
Sequence decode_one(std::string_view text, size_t pos);

// Byte offset of the first byte that does not belong to a valid character, or nullopt.
std::optional<size_t> first_invalid_offset(std::string_view text);

// Replaces each maximal invalid subsequence (including a truncated tail) by one U+FFFD.
std::string decode_lossy(std::string_view bytes);

// Length of a trailing sequence that is incomplete but could still become valid, 0 if none.
// A streaming decoder holds these bytes back until the next bytes arrive.
size_t incomplete_tail_length(std::string_view bytes);

void append_code_point(std::string& out, char32_t code_point);

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

}  // namespace jet::utf8
