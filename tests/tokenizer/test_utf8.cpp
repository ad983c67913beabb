// UTF-8 helpers, the GPT-2 byte alphabet and the Unicode classes the tokenizer relies on.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode_classes.h"
#include "core/utf8.h"

namespace jet {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, FirstInvalidOffset) {
  EXPECT_FALSE(utf8::first_invalid_offset("").has_value());
  EXPECT_FALSE(utf8::first_invalid_offset("plain \xC3\xA9 \xE4\xB8\x96 \xF0\x9F\x8C\x8D").has_value());
  EXPECT_FALSE(utf8::first_invalid_offset(std::string("a\0b", 3)).has_value());
  EXPECT_EQ(utf8::first_invalid_offset("abc\x80"), 3u);            // stray continuation byte
  EXPECT_EQ(utf8::first_invalid_offset("ab\xC0\xAF"), 2u);         // overlong '/'
  EXPECT_EQ(utf8::first_invalid_offset("\xED\xA0\x80"), 0u);       // surrogate U+D800
  EXPECT_EQ(utf8::first_invalid_offset("x\xF4\x90\x80\x80"), 1u);  // above U+10FFFF
  EXPECT_EQ(utf8::first_invalid_offset("xy\xE4\xB8"), 2u);         // truncated at the end
  EXPECT_EQ(utf8::first_invalid_offset("\xFF"), 0u);
}

TEST(Utf8, LossyDecodeReplacesEachMaximalSubpart) {
  // The examples of Unicode's "U+FFFD substitution of maximal subparts" practice.
  EXPECT_EQ(utf8::decode_lossy("a\xF1\x80\x80"
                               "b"),
            "a" + kFffd + "b");  // one truncated sequence
  EXPECT_EQ(utf8::decode_lossy("\xE1\x80\xE2\xF0\x91\x92\xF1\xBF\x41"), kFffd + kFffd + kFffd + kFffd + "A");
  EXPECT_EQ(utf8::decode_lossy("\xC0\xAF"), kFffd + kFffd);  // C0 never starts a sequence
  EXPECT_EQ(utf8::decode_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);
  EXPECT_EQ(utf8::decode_lossy("\xF0\x9F\x8C"), kFffd);
  EXPECT_EQ(utf8::decode_lossy("ok \xE4\xB8\x96"), "ok \xE4\xB8\x96");
}

TEST(Utf8, IncompleteTailLength) {
  EXPECT_EQ(utf8::incomplete_tail_length(""), 0u);
  EXPECT_EQ(utf8::incomplete_tail_length("abc"), 0u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\xF0"), 1u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\xF0\x9F"), 2u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\xF0\x9F\x8C"), 3u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\xF0\x9F\x8C\x8D"), 0u);  // complete
  EXPECT_EQ(utf8::incomplete_tail_length("a\xE0\x80"), 0u);          // already invalid: no waiting
  EXPECT_EQ(utf8::incomplete_tail_length("a\x80\x80"), 0u);
}

TEST(Utf8, AppendCodePoint) {
  std::string out;
  for (char32_t cp : {U'A', U'\u00E9', U'\u4E16', U'\U0001F30D'}) utf8::append_code_point(out, cp);
  EXPECT_EQ(out, "A\xC3\xA9\xE4\xB8\x96\xF0\x9F\x8C\x8D");
}

TEST(ByteLevel, Gpt2Alphabet) {
  EXPECT_EQ(byte_level::byte_to_symbol('A'), U'A');
  EXPECT_EQ(byte_level::byte_to_symbol(' '), U'\u0120');   // 'Ġ'
  EXPECT_EQ(byte_level::byte_to_symbol('\n'), U'\u010A');  // 'Ċ'
  EXPECT_EQ(byte_level::byte_to_symbol(0), U'\u0100');
  EXPECT_EQ(byte_level::byte_to_symbol(0xAD), U'\u0143');  // the last of the 68 remapped bytes
  EXPECT_EQ(byte_level::encode(" hi\n"), "\xC4\xA0hi\xC4\x8A");
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  EXPECT_EQ(byte_level::decode(byte_level::encode(all_bytes)), all_bytes);
  EXPECT_FALSE(byte_level::decode("<|im_end|> x").has_value());  // ' ' is not in the alphabet
  EXPECT_FALSE(byte_level::decode("\xE4\xB8\x96").has_value());
}

TEST(UnicodeClasses, WhiteSpaceIsTheUnicodeProperty) {
  for (char32_t cp : {U'\t', U' ', U'\u0085', U'\u00A0', U'\u2028', U'\u3000'})
    EXPECT_TRUE(unicode::is_white_space(cp));
  for (char32_t cp : {U'a', U'\u180E', U'\u200B', U'\uFEFF'}) EXPECT_FALSE(unicode::is_white_space(cp));
  EXPECT_EQ(unicode::white_space_code_points().size(), 25u);
}

TEST(UnicodeClasses, WordCharacters) {
  for (char32_t cp : {U'a', U'Z', U'7', U'_', U'\u00E9', U'\u4E16', U'\u0301'})
    EXPECT_TRUE(unicode::is_word_character(cp));
  for (char32_t cp : {U' ', U'-', U'<', U'\u3002'}) EXPECT_FALSE(unicode::is_word_character(cp));
}

// The NFC fast path's premise, checked against utf8proc itself: a text made of inert
// characters (each one here, between inert neighbours of several scripts) is already NFC.
TEST(UnicodeClasses, NfcInertCharactersAreStable) {
  auto nfc = [](const std::string& s) {
    utf8proc_uint8_t* out = nullptr;
    const auto n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()), &out,
                     static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(n));
    std::free(out);
    return result;
  };
  size_t inert = 0;
  for (char32_t cp = 0x20; cp < 0x30000; ++cp) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || !unicode::is_nfc_inert(cp)) continue;
    ++inert;
    std::string text;
    for (char32_t neighbour : {U'A', U'e', U'\u4E00', U'\uAC00'}) {
      utf8::append_code_point(text, neighbour);
      utf8::append_code_point(text, cp);
    }
    ASSERT_EQ(nfc(text), text) << std::hex << static_cast<uint32_t>(cp);
  }
  EXPECT_GT(inert, 100000u);                    // CJK ideographs, Hangul syllables, ... take the fast path
  EXPECT_FALSE(unicode::is_nfc_inert(0x0301));  // combining acute
  EXPECT_FALSE(unicode::is_nfc_inert(0x212B));  // ANGSTROM SIGN -> U+00C5
  EXPECT_FALSE(unicode::is_nfc_inert(0x1161));  // Hangul vowel jamo composes with a lead jamo
  EXPECT_TRUE(unicode::is_nfc_inert(0xFF0C));   // FULLWIDTH COMMA: compatibility mapping only
}

}  // namespace
}  // namespace jet
