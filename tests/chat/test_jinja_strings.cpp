// Python str semantics of the chat-template interpreter's string helpers (jinja_strings.h).
#include <gtest/gtest.h>

#include <limits>

#include "chat/jinja_strings.h"

namespace jet::jinja {
namespace {

TEST(JinjaStrings, FloatReprMatchesPython) {
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(-2.5), "-2.5");
  EXPECT_EQ(python_float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(0.00001), "1e-05");
  EXPECT_EQ(python_float_repr(1.5e-300), "1.5e-300");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(python_float_repr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(python_float_repr(std::numeric_limits<double>::quiet_NaN()), "nan");
}

TEST(JinjaStrings, NumberParsingFollowsPythonIntAndFloat) {
  EXPECT_EQ(parse_python_int(" -42 "), -42);
  EXPECT_EQ(parse_python_int("+1_000"), 1000);
  EXPECT_EQ(parse_python_int("1__0"), std::nullopt);
  EXPECT_EQ(parse_python_int("+-5"), std::nullopt);
  EXPECT_EQ(parse_python_int("4.5"), std::nullopt);
  EXPECT_EQ(parse_python_int("99999999999999999999"), std::nullopt);
  EXPECT_EQ(parse_python_float(" +1_0.5\n"), 10.5);
  EXPECT_EQ(parse_python_float("-1e3"), -1000.0);
  EXPECT_EQ(parse_python_float(".5"), 0.5);
  EXPECT_EQ(parse_python_float("-Infinity"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_python_float("1e999"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_python_float("1e-999"), 0.0);
  EXPECT_EQ(parse_python_float("0x10"), std::nullopt);
  EXPECT_EQ(parse_python_float("1.5x"), std::nullopt);
}

TEST(JinjaStrings, StripUsesPythonWhitespaceIncludingUnicodeSpaces) {
  EXPECT_EQ(python_strip(" \t\n\u3000\u00a0x y\u2028\r ", std::nullopt, StripSide::kBoth), "x y");
  EXPECT_EQ(python_strip("  x  ", std::nullopt, StripSide::kLeft), "x  ");
  EXPECT_EQ(python_strip("  x  ", std::nullopt, StripSide::kRight), "  x");
  EXPECT_EQ(python_strip("\u200bx\u200b", std::nullopt, StripSide::kBoth), "\u200bx\u200b");  // ZWSP is not space
  EXPECT_EQ(python_strip("xyéhiéyx", std::string("xyé"), StripSide::kBoth), "hi");
}

TEST(JinjaStrings, SplitFollowsPython) {
  using Parts = std::vector<std::string>;
  EXPECT_EQ(python_split("a,b,,c", std::string(","), -1), (Parts{"a", "b", "", "c"}));
  EXPECT_EQ(python_split("a,b,c", std::string(","), 1), (Parts{"a", "b,c"}));
  EXPECT_EQ(python_split("", std::string(","), -1), (Parts{""}));
  EXPECT_EQ(python_split("  a \n b\u3000c  ", std::nullopt, -1), (Parts{"a", "b", "c"}));
  EXPECT_EQ(python_split(" a  b  c ", std::nullopt, 1), (Parts{"a", "b  c"}));
  EXPECT_EQ(python_split("   ", std::nullopt, -1), Parts{});
}

TEST(JinjaStrings, ReplaceCountsAndEmptyPattern) {
  EXPECT_EQ(python_replace("a-b-c", "-", "+", -1), "a+b+c");
  EXPECT_EQ(python_replace("a-b-c", "-", "+", 1), "a+b-c");
  EXPECT_EQ(python_replace("aé", "", ".", -1), ".a.é.");
}

TEST(JinjaStrings, CodePointsAndInvalidBytesRoundTrip) {
  EXPECT_EQ(code_point_count("héllo 🌍"), 7u);
  const std::string invalid = "a\xff\xc3(b";
  EXPECT_EQ(decode_utf8(invalid).size(), 5u);
  EXPECT_EQ(encode_utf8(decode_utf8(invalid)), invalid);
}

TEST(JinjaStrings, CaseMappingAndRepr) {
  EXPECT_EQ(python_upper("héllo"), "HÉLLO");
  EXPECT_EQ(python_lower("ÀB"), "àb");
  EXPECT_EQ(python_capitalize("hELLO wORLD"), "Hello world");
  EXPECT_EQ(python_string_repr("it's"), "\"it's\"");
  EXPECT_EQ(python_string_repr("a'b\"c\n\x01é"), "'a\\'b\"c\\n\\x01é'");
}

}  // namespace
}  // namespace jet::jinja
