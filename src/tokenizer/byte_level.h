// The GPT-2 byte-level alphabet: every byte is written as one printable character, so that BPE
// vocabularies can be stored as text (space = U+0120 'Ġ', newline = U+010A 'Ċ').
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace jet::byte_level {

// The character that stands for `byte`.
char32_t byte_to_symbol(unsigned char byte);

// UTF-8 text of the symbols for `bytes` (what a vocabulary entry for those bytes looks like).
std::string encode(std::string_view bytes);

// The bytes a vocabulary token stands for, or nullopt if it holds a character outside the
// alphabet (HF's ByteLevel decoder then uses the token's own UTF-8 bytes).
std::optional<std::string> decode(std::string_view token);

}  // namespace jet::byte_level
