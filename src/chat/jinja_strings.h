// Python `str` semantics over UTF-8 std::strings, for the chat-template interpreter: code-point
// indexing, str.isspace, strip/split/replace/upper/lower, and Python's float repr.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jet::jinja {

// Decodes UTF-8 into code points. Invalid bytes map to U+DC80+byte (Python's "surrogateescape"),
// so encode_utf8(decode_utf8(s)) == s for every byte string.
std::u32string decode_utf8(std::string_view text);
std::string encode_utf8(std::u32string_view code_points);

// The code point at text[i] (i < text.size()); `length` gets its size in bytes (1 for an invalid
// byte, which decodes to its surrogateescape code point).
char32_t code_point_at(std::string_view text, size_t i, size_t& length);

// len(str) in Python: the number of code points.
size_t code_point_count(std::string_view text);

// Python str.isspace() for one code point (also what `\s` matches in Python's re).
bool is_python_space(char32_t c);

enum class StripSide { kBoth, kLeft, kRight };
// str.strip() / lstrip() / rstrip(); without `chars` strips Python whitespace.
std::string python_strip(std::string_view text, const std::optional<std::string>& chars, StripSide side);

// str.split(sep, maxsplit); without `sep` splits on runs of whitespace and drops empty parts.
// maxsplit < 0 means no limit. `sep` must not be empty (Python raises; callers check).
std::vector<std::string> python_split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit);

// str.replace(old, new, count); count < 0 replaces every occurrence. An empty `old` inserts
// `replacement` between code points, as Python does.
std::string python_replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count);

// Simple (one-to-one) case mappings from utf8proc; Python's full mappings differ for a few letters
// (e.g. 'ß'.upper() is 'SS' in Python, 'ß' here).
std::string python_upper(std::string_view text);
std::string python_lower(std::string_view text);
// str.capitalize(): first code point upper, the rest lower.
std::string python_capitalize(std::string_view text);

// int(text) and float(text) in Python for decimal text: surrounding whitespace, a sign and
// digit-group underscores are allowed; nullopt where Python raises ValueError (and for ints that
// do not fit int64). Out-of-range floats become ±inf, or 0 for negative exponents.
std::optional<int64_t> parse_python_int(std::string_view text);
std::optional<double> parse_python_float(std::string_view text);

// repr(float) in Python: shortest round-trip digits, "1.0", "1e-05", "1.5e+16", "inf", "nan".
std::string python_float_repr(double value);

// repr(str) in Python: quoted with ' (or " when the text holds ' and no "), escapes for control chars.
std::string python_string_repr(std::string_view text);

}  // namespace jet::jinja
