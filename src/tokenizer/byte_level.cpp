// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes are
// numbered in order from U+0100.
#include "tokenizer/byte_level.h"

#include <array>

#include "core/utf8.h"

namespace jet::byte_level {
namespace {

bool is_printable_latin1(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<char32_t, 256> symbol_of_byte{};
  std::array<std::string, 256> utf8_of_byte;
  // Every symbol is below U+0144, so a flat table inverts the map; -1 marks "not a symbol".
  static constexpr char32_t kSymbolLimit = 0x100 + 68;
  std::array<int, kSymbolLimit> byte_of_symbol{};

  Alphabet() {
    byte_of_symbol.fill(-1);
    char32_t next_extra = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      symbol_of_byte[b] = is_printable_latin1(b) ? b : next_extra++;
      utf8::append_code_point(utf8_of_byte[b], symbol_of_byte[b]);
      byte_of_symbol[symbol_of_byte[b]] = static_cast<int>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet table;
  return table;
}

}  // namespace

char32_t byte_to_symbol(unsigned char byte) { return alphabet().symbol_of_byte[byte]; }

std::string encode(std::string_view bytes) {
  const Alphabet& table = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += table.utf8_of_byte[static_cast<unsigned char>(c)];
  return out;
}

std::optional<std::string> decode(std::string_view token) {
  const Alphabet& table = alphabet();
  std::string bytes;
  bytes.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const utf8::Sequence seq = utf8::decode_one(token, pos);
    if (seq.kind != utf8::Sequence::Kind::CHARACTER || seq.code_point >= Alphabet::kSymbolLimit) {
      return std::nullopt;
    }
    const int byte = table.byte_of_symbol[seq.code_point];
    if (byte < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(byte));
    pos += seq.length;
  }
  return bytes;
}

}  // namespace jet::byte_level
