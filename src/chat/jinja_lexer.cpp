// Template lexer (see jinja_lexer.h). It follows the rules of Jinja2's lexer: the text before a tag
// is stripped by `-`, or left-stripped up to its line start under lstrip_blocks; inside a tag the
// end delimiter only counts when all brackets are closed.
#include "chat/jinja_lexer.h"

#include <algorithm>
#include <array>
#include <optional>

#include "core/error.h"
#include "chat/jinja_strings.h"

namespace jet::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Jinja normalizes every newline to "\n" and drops one trailing newline (keep_trailing_newline off).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Skips Python whitespace (what `\s` matches in Jinja's regexes) from i on.
size_t skip_spaces(std::string_view text, size_t i) {
  while (i < text.size()) {
    size_t length = 0;
    if (!is_python_space(code_point_at(text, i, length))) break;
    i += length;
  }
  return i;
}

// The `\d+(_\d+)*` digit run starting at i; returns its end, or nullopt when there is none.
std::optional<size_t> scan_digits(std::string_view text, size_t i) {
  if (i >= text.size() || !is_digit(text[i])) return std::nullopt;
  while (i < text.size()) {
    if (is_digit(text[i])) {
      ++i;
    } else if (text[i] == '_' && i + 1 < text.size() && is_digit(text[i + 1])) {
      ++i;
    } else {
      break;
    }
  }
  return i;
}

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options) : source_(normalize_newlines(source)), options_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < source_.size(); ++i) {
      if (source_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < source_.size()) {
      const size_t tag = find_tag_start(pos);
      if (tag == std::string::npos) {
        emit(TokenType::kText, source_.substr(pos), pos);
        break;
      }
      pos = lex_tag(pos, tag);
    }
    emit(TokenType::kEnd, "", source_.size());
    return std::move(tokens_);
  }

 private:
  size_t find_tag_start(size_t from) const {
    for (size_t i = source_.find('{', from); i != std::string::npos; i = source_.find('{', i + 1)) {
      if (i + 1 < source_.size() && (source_[i + 1] == '{' || source_[i + 1] == '%' || source_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  // Lexes the text in [text_begin, tag) and the tag that starts at `tag`; returns the position after it.
  size_t lex_tag(size_t text_begin, size_t tag) {
    const char kind = source_[tag + 1];
    const char sign = tag + 2 < source_.size() ? source_[tag + 2] : '\0';
    const bool has_sign = sign == '-' || sign == '+';
    std::string text = source_.substr(text_begin, tag - text_begin);
    if (sign == '-') {
      text = python_strip(text, std::nullopt, StripSide::kRight);
    } else if (sign != '+' && options_.lstrip_blocks && kind != '{') {
      text = left_strip_line(std::move(text), text_begin);
    }
    emit(TokenType::kText, std::move(text), text_begin);
    const size_t content = tag + 2 + (has_sign ? 1 : 0);
    if (kind == '#') return skip_comment(tag, content);
    const bool is_block = kind == '%';
    emit(is_block ? TokenType::kBlockBegin : TokenType::kVariableBegin, "", tag);
    return lex_tag_contents(tag, content, is_block);
  }

  // lstrip_blocks: spaces between the start of the tag's line and the tag are not output.
  std::string left_strip_line(std::string text, size_t text_begin) const {
    const size_t newline = text.rfind('\n');
    const size_t line_begin = newline == std::string::npos ? 0 : newline + 1;
    const bool at_line_start = line_begin > 0 || text_begin == 0 || source_[text_begin - 1] == '\n';
    if (!at_line_start || line_begin == text.size()) return text;
    if (skip_spaces(text, line_begin) == text.size()) text.resize(line_begin);
    return text;
  }

  size_t skip_comment(size_t tag, size_t i) {
    for (; i + 1 < source_.size(); ++i) {
      if (source_.compare(i, 3, "+#}") == 0) return i + 3;
      if (source_.compare(i, 3, "-#}") == 0) return skip_spaces(source_, i + 3);
      if (source_.compare(i, 2, "#}") == 0) return after_block_end(i + 2);
    }
    fail(tag, "missing end of comment tag '#}'");
  }

  // trim_blocks: the newline right after a block or comment tag is not output.
  size_t after_block_end(size_t i) const {
    if (options_.trim_blocks && i < source_.size() && source_[i] == '\n') return i + 1;
    return i;
  }

  // Tokens inside {{ }} or {% %}; returns the position after the closing delimiter.
  size_t lex_tag_contents(size_t tag, size_t i, bool is_block) {
    std::vector<char> open_brackets;
    while (true) {
      i = skip_spaces(source_, i);
      if (i >= source_.size()) {
        fail(tag, is_block ? "missing end of block tag '%}'" : "missing end of variable tag '}}'");
      }
      if (open_brackets.empty()) {
        if (const std::optional<size_t> end = match_tag_end(i, is_block)) {
          emit(is_block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", i);
          return *end;
        }
      }
      i = lex_token(i, open_brackets);
    }
  }

  std::optional<size_t> match_tag_end(size_t i, bool is_block) const {
    if (is_block) {
      if (source_.compare(i, 3, "+%}") == 0) return i + 3;
      if (source_.compare(i, 3, "-%}") == 0) return skip_spaces(source_, i + 3);
      if (source_.compare(i, 2, "%}") == 0) return after_block_end(i + 2);
    } else {
      if (source_.compare(i, 3, "-}}") == 0) return skip_spaces(source_, i + 3);
      if (source_.compare(i, 2, "}}") == 0) return i + 2;
    }
    return std::nullopt;
  }

  size_t lex_token(size_t i, std::vector<char>& open_brackets) {
    const char c = source_[i];
    if (is_digit(c)) return lex_number(i);
    if (is_name_start(c)) {
      size_t end = i;
      while (end < source_.size() && is_name_char(source_[end])) ++end;
      emit(TokenType::kName, source_.substr(i, end - i), i);
      return end;
    }
    if (c == '\'' || c == '"') return lex_string(i);
    return lex_operator(i, open_brackets);
  }

  size_t lex_number(size_t i) {
    // A float needs a fraction or an exponent; "1." is the integer 1 followed by a dot, and right
    // after a dot (foo.0.1) only integers are read, as in Jinja.
    const bool after_dot = i > 0 && source_[i - 1] == '.';
    size_t end = *scan_digits(source_, i);
    bool is_float = false;
    if (!after_dot) {
      if (end < source_.size() && source_[end] == '.') {
        if (const auto fraction = scan_digits(source_, end + 1)) end = *fraction, is_float = true;
      }
      if (end < source_.size() && (source_[end] == 'e' || source_[end] == 'E')) {
        size_t exponent = end + 1;
        if (exponent < source_.size() && (source_[exponent] == '+' || source_[exponent] == '-')) ++exponent;
        if (const auto digits = scan_digits(source_, exponent)) end = *digits, is_float = true;
      }
    }
    std::string spelling;
    for (size_t k = i; k < end; ++k) {
      if (source_[k] != '_') spelling.push_back(source_[k]);
    }
    emit(is_float ? TokenType::kFloat : TokenType::kInteger, std::move(spelling), i);
    return end;
  }

  size_t lex_string(size_t start) {
    const char quote = source_[start];
    std::string value;
    size_t i = start + 1;
    while (true) {
      if (i >= source_.size()) fail(start, "unterminated string literal");
      const char c = source_[i];
      if (c == quote) break;
      if (c != '\\') {
        value.push_back(c);
        ++i;
        continue;
      }
      if (i + 1 >= source_.size()) fail(start, "unterminated string literal");
      i = unescape(i, value);
    }
    emit(TokenType::kString, std::move(value), start);
    return i + 1;
  }

  // Decodes the escape at source_[i] == '\\' the way Python's "unicode-escape" codec does.
  size_t unescape(size_t i, std::string& value) {
    const char c = source_[i + 1];
    const auto simple = [&](char out) {
      value.push_back(out);
      return i + 2;
    };
    switch (c) {
      case '\n':
        return i + 2;  // line continuation
      case '\\':
        return simple('\\');
      case '\'':
        return simple('\'');
      case '"':
        return simple('"');
      case 'a':
        return simple('\a');
      case 'b':
        return simple('\b');
      case 'f':
        return simple('\f');
      case 'n':
        return simple('\n');
      case 'r':
        return simple('\r');
      case 't':
        return simple('\t');
      case 'v':
        return simple('\v');
      case 'x':
        return unescape_hex(i, 2, value);
      case 'u':
        return unescape_hex(i, 4, value);
      case 'U':
        return unescape_hex(i, 8, value);
      default:
        break;
    }
    if (c >= '0' && c <= '7') {
      char32_t code = 0;
      size_t k = i + 1;
      for (; k < i + 4 && k < source_.size() && source_[k] >= '0' && source_[k] <= '7'; ++k) {
        code = code * 8 + static_cast<char32_t>(source_[k] - '0');
      }
      value += encode_utf8(std::u32string(1, code));
      return k;
    }
    value.push_back('\\');  // unknown escapes stay as written
    return i + 1;
  }

  size_t unescape_hex(size_t i, size_t digits, std::string& value) {
    char32_t code = 0;
    for (size_t k = 0; k < digits; ++k) {
      const size_t at = i + 2 + k;
      const int digit = at < source_.size() ? hex_value(source_[at]) : -1;
      if (digit < 0) fail(i, str("truncated \\", source_[i + 1], " escape in string literal"));
      code = code * 16 + static_cast<char32_t>(digit);
    }
    if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) fail(i, "invalid code point in string escape");
    value += encode_utf8(std::u32string(1, code));
    return i + 2 + digits;
  }

  size_t lex_operator(size_t i, std::vector<char>& open_brackets) {
    static constexpr std::array<std::string_view, 6> kTwoChar = {"//", "**", "==", "!=", ">=", "<="};
    static constexpr std::string_view kOneChar = "+-/*%~[](){}><=.:|,;";
    for (std::string_view op : kTwoChar) {
      if (source_.compare(i, 2, op) == 0) {
        emit(TokenType::kOperator, std::string(op), i);
        return i + 2;
      }
    }
    const char c = source_[i];
    if (kOneChar.find(c) == std::string_view::npos) {
      size_t length = 0;
      code_point_at(source_, i, length);
      fail(i, str("unexpected character '", source_.substr(i, length), "' in tag"));
    }
    if (c == '(' || c == '[' || c == '{') {
      open_brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (open_brackets.empty()) fail(i, str("unexpected '", c, "'"));
      if (open_brackets.back() != c) fail(i, str("unexpected '", c, "', expected '", open_brackets.back(), "'"));
      open_brackets.pop_back();
    }
    emit(TokenType::kOperator, std::string(1, c), i);
    return i + 1;
  }

  // Tokens arrive in source order, so the column is counted on from the previous position
  // instead of from the line start (long one-line templates stay linear).
  SourcePos position(size_t offset) {
    const auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    const size_t line_begin = *line;
    if (offset < last_offset_ || line_begin > last_offset_) {
      last_offset_ = line_begin;
      last_column_ = 1;
    }
    last_column_ +=
        static_cast<int>(code_point_count(std::string_view(source_).substr(last_offset_, offset - last_offset_)));
    last_offset_ = offset;
    return {static_cast<int>(line - line_starts_.begin()) + 1, last_column_};
  }

  void emit(TokenType type, std::string text, size_t offset) {
    if (type == TokenType::kText && text.empty()) return;
    tokens_.push_back({type, std::move(text), position(offset)});
  }

  [[noreturn]] void fail(size_t offset, const std::string& message) {
    throw Error(located_message(position(offset), "syntax error: " + message));
  }

  const std::string source_;
  const LexerOptions options_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t last_offset_ = 0;  // the offset and column position() computed last
  int last_column_ = 1;
};

}  // namespace

std::string located_message(const SourcePos& pos, const std::string& message) {
  return str("chat template line ", pos.line, ", column ", pos.column, ": ", message);
}

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace jet::jinja
