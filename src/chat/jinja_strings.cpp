// Python `str` semantics over UTF-8 (see jinja_strings.h).
#include "chat/jinja_strings.h"

#include <utf8proc.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/error.h"

namespace jet::jinja {
namespace {

constexpr char32_t kEscapedByteBase = 0xDC80;  // surrogateescape: byte b <-> U+DC80 + (b - 0x80)

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is not valid.
size_t valid_sequence_length(std::string_view text, size_t i, char32_t& code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  char32_t min_value = 0;
  if (lead < 0x80) {
    code_point = lead;
    return 1;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2, code_point = lead & 0x1F, min_value = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, code_point = lead & 0x0F, min_value = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, code_point = lead & 0x07, min_value = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(k) & 0x3F);
  }
  const bool surrogate = code_point >= 0xD800 && code_point <= 0xDFFF;
  if (code_point < min_value || code_point > 0x10FFFF || surrogate) return 0;
  return length;
}

std::u32string chars_to_strip(const std::optional<std::string>& chars) {
  return chars ? decode_utf8(*chars) : std::u32string();
}

template <typename Map>
std::string map_code_points(std::string_view text, Map map) {
  std::u32string code_points = decode_utf8(text);
  for (char32_t& c : code_points) c = map(c);
  return encode_utf8(code_points);
}

char32_t to_upper(char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
char32_t to_lower(char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return false;
    default:
      return true;
  }
}

// Removes Python's digit-group underscores; nullopt when one is not between two digits.
std::optional<std::string> without_underscores(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '_') {
      out.push_back(text[i]);
      continue;
    }
    const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
    if (i == 0 || i + 1 == text.size() || !is_digit(text[i - 1]) || !is_digit(text[i + 1])) return std::nullopt;
  }
  return out;
}

}  // namespace

char32_t code_point_at(std::string_view text, size_t i, size_t& length) {
  char32_t code_point = 0;
  length = valid_sequence_length(text, i, code_point);
  if (length > 0) return code_point;
  length = 1;
  return kEscapedByteBase + (static_cast<unsigned char>(text[i]) - 0x80);
}

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t length = 0;
    out.push_back(code_point_at(text, i, length));
    i += length;
  }
  return out;
}

std::string encode_utf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t c : code_points) {
    if (c >= kEscapedByteBase && c < kEscapedByteBase + 0x80) {
      out.push_back(static_cast<char>(c - kEscapedByteBase + 0x80));
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

size_t code_point_count(std::string_view text) {
  size_t count = 0;
  size_t length = 0;
  for (size_t i = 0; i < text.size(); i += length) {
    code_point_at(text, i, length);
    ++count;
  }
  return count;
}

bool is_python_space(char32_t c) {
  switch (c) {
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case ' ':
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

std::string python_strip(std::string_view text, const std::optional<std::string>& chars, StripSide side) {
  const std::u32string code_points = decode_utf8(text);
  const std::u32string strip_set = chars_to_strip(chars);
  const auto strippable = [&](char32_t c) {
    return chars ? strip_set.find(c) != std::u32string::npos : is_python_space(c);
  };
  size_t begin = 0;
  size_t end = code_points.size();
  if (side != StripSide::kRight) {
    while (begin < end && strippable(code_points[begin])) ++begin;
  }
  if (side != StripSide::kLeft) {
    while (end > begin && strippable(code_points[end - 1])) --end;
  }
  return encode_utf8(std::u32string_view(code_points).substr(begin, end - begin));
}

std::vector<std::string> python_split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    JET_ASSERT(!sep->empty(), "callers reject an empty separator");
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t found = text.find(*sep, start);
      if (found == std::string_view::npos) break;
      parts.emplace_back(text.substr(start, found - start));
      start = found + sep->size();
    }
    parts.emplace_back(text.substr(start));
    return parts;
  }
  // Whitespace split: runs of whitespace separate parts; leading/trailing whitespace gives none.
  const std::u32string code_points = decode_utf8(text);
  size_t i = 0;
  const size_t n = code_points.size();
  while (true) {
    while (i < n && is_python_space(code_points[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      // The rest (right-stripped) is the last part, as in Python.
      size_t end = n;
      while (end > i && is_python_space(code_points[end - 1])) --end;
      parts.push_back(encode_utf8(std::u32string_view(code_points).substr(i, end - i)));
      break;
    }
    const size_t start = i;
    while (i < n && !is_python_space(code_points[i])) ++i;
    parts.push_back(encode_utf8(std::u32string_view(code_points).substr(start, i - start)));
  }
  return parts;
}

std::string python_replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count) {
  std::string out;
  int64_t done = 0;
  const auto may_replace = [&] { return count < 0 || done < count; };
  if (old.empty()) {
    // Python inserts the replacement before every code point and at the end.
    const std::u32string code_points = decode_utf8(text);
    for (char32_t c : code_points) {
      if (may_replace()) out.append(replacement), ++done;
      out += encode_utf8(std::u32string(1, c));
    }
    if (may_replace()) out.append(replacement);
    return out;
  }
  size_t start = 0;
  while (may_replace()) {
    const size_t found = text.find(old, start);
    if (found == std::string_view::npos) break;
    out.append(text.substr(start, found - start)).append(replacement);
    start = found + old.size();
    ++done;
  }
  out.append(text.substr(start));
  return out;
}

std::string python_upper(std::string_view text) { return map_code_points(text, to_upper); }
std::string python_lower(std::string_view text) { return map_code_points(text, to_lower); }

std::string python_capitalize(std::string_view text) {
  std::u32string code_points = decode_utf8(text);
  for (size_t i = 0; i < code_points.size(); ++i) {
    code_points[i] = i == 0 ? to_upper(code_points[i]) : to_lower(code_points[i]);
  }
  return encode_utf8(code_points);
}

std::optional<int64_t> parse_python_int(std::string_view text) {
  const std::optional<std::string> digits = without_underscores(python_strip(text, std::nullopt, StripSide::kBoth));
  if (!digits || digits->empty()) return std::nullopt;
  const char* begin = digits->data();
  const char* end = digits->data() + digits->size();
  if (*begin == '+' && begin + 1 < end && begin[1] != '-') ++begin;  // from_chars takes '-' but not '+'
  int64_t value = 0;
  const auto result = std::from_chars(begin, end, value);
  if (result.ec != std::errc() || result.ptr != end) return std::nullopt;
  return value;
}

std::optional<double> parse_python_float(std::string_view text) {
  const std::optional<std::string> cleaned = without_underscores(python_strip(text, std::nullopt, StripSide::kBoth));
  if (!cleaned || cleaned->empty()) return std::nullopt;
  const bool negative = cleaned->front() == '-';
  const char* begin = cleaned->data() + (cleaned->front() == '+' || negative ? 1 : 0);
  const char* end = cleaned->data() + cleaned->size();
  const std::string magnitude = python_lower(std::string_view(begin, static_cast<size_t>(end - begin)));
  const double sign = negative ? -1.0 : 1.0;
  if (magnitude == "inf" || magnitude == "infinity") return sign * std::numeric_limits<double>::infinity();
  if (magnitude == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (magnitude.empty() || magnitude.front() == '+' || magnitude.front() == '-') return std::nullopt;
  // from_chars reads the decimal forms Python accepts, independent of the C locale.
  double value = 0;
  const auto result =
      std::from_chars(magnitude.data(), magnitude.data() + magnitude.size(), value, std::chars_format::general);
  if (result.ptr != magnitude.data() + magnitude.size()) return std::nullopt;
  if (result.ec == std::errc::result_out_of_range) {
    const bool tiny = magnitude.find("e-") != std::string::npos;
    return sign * (tiny ? 0.0 : std::numeric_limits<double>::infinity());
  }
  if (result.ec != std::errc()) return std::nullopt;
  return sign * value;
}

std::string python_float_repr(double value) {
  if (value != value) return "nan";
  if (value == std::numeric_limits<double>::infinity()) return "inf";
  if (value == -std::numeric_limits<double>::infinity()) return "-inf";
  // Shortest round-trip digits in scientific form, e.g. "-1.2345e+17", then laid out as Python does.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  const std::string_view scientific(buffer, static_cast<size_t>(result.ptr - buffer));
  const size_t e_pos = scientific.find('e');
  std::string_view mantissa = scientific.substr(0, e_pos);
  const int exponent = std::stoi(std::string(scientific.substr(e_pos + 1)));
  std::string sign;
  if (!mantissa.empty() && mantissa.front() == '-') sign = "-", mantissa.remove_prefix(1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  const int point = exponent + 1;  // value = 0.<digits> * 10^point
  const int n = static_cast<int>(digits.size());
  if (point <= -4 || point > 16) {
    std::string out = sign + digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    char exponent_text[16];
    std::snprintf(exponent_text, sizeof(exponent_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exponent_text;
  }
  if (point <= 0) return sign + "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  if (point >= n) return sign + digits + std::string(static_cast<size_t>(point - n), '0') + ".0";
  return sign + digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
}

std::string python_string_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decode_utf8(text)) {
    char escaped[16] = {0};
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (is_printable(c)) {
      out += encode_utf8(std::u32string(1, c));
    } else {
      if (c < 0x100) {
        std::snprintf(escaped, sizeof(escaped), "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(escaped, sizeof(escaped), "\\U%08x", static_cast<unsigned>(c));
      }
      out += escaped;
    }
  }
  out.push_back(quote);
  return out;
}

}  // namespace jet::jinja
