// PCRE2 wrapper. The compiled pattern is shared; match data and the JIT stack are per thread,
// because PCRE2 forbids sharing them between concurrent matches.
#include "tokenizer/regex.h"

#include <cstdio>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/unicode_classes.h"
#include "core/utf8.h"

namespace jet::tokenizer {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// The White_Space code points as the inside of a PCRE2 character class.
std::string white_space_class_body() {
  std::string body;
  for (char32_t code_point : unicode::white_space_code_points()) {
    char escape[16];
    std::snprintf(escape, sizeof(escape), "\\x{%X}", static_cast<unsigned>(code_point));
    body += escape;
  }
  return body;
}

// Per-thread matching state. The JIT stack may grow to 8 MiB so that long runs (e.g. a
// megabyte of spaces) match instead of failing with a stack-limit error.
struct ThreadMatchState {
  pcre2_match_data* match_data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);

  ThreadMatchState() {
    JET_ASSERT(match_data && context && jit_stack, "PCRE2 allocation failed");
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
    // The default limit of 10 million match steps fails on 10 MB of whitespace (one pre-token).
    pcre2_set_match_limit(context, UINT32_MAX);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match_data);
  }
  ThreadMatchState(const ThreadMatchState&) = delete;
  ThreadMatchState& operator=(const ThreadMatchState&) = delete;
};

}  // namespace

std::string rewrite_white_space_classes(std::string_view pattern) {
  const std::string body = white_space_class_body();
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escaped = pattern[++i];
      if (escaped == 's') {
        out += in_class ? body : "[" + body + "]";
      } else if (escaped == 'S' && !in_class) {
        out += "[^" + body + "]";
      } else {
        out += c;
        out += escaped;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      // A POSIX class such as [:alpha:] inside a class: copy it whole so its ']' is not taken
      // for the end of the enclosing class.
      const size_t close = pattern.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(pattern.substr(i + 1, close + 2 - (i + 1)));
        i = close + 1;
      }
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern, Syntax syntax) : code_(std::make_unique<Code>()) {
  const std::string source = syntax == Syntax::PATTERN ? rewrite_white_space_classes(pattern) : std::string(pattern);
  // PCRE2 refuses UCP together with LITERAL (character classes do not exist there anyway).
  const uint32_t options = syntax == Syntax::LITERAL ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options, &error_code,
                              &error_offset, nullptr);
  JET_CHECK(code_->code, "invalid regex '", pattern, "': ", pcre2_message(error_code), " at offset ", error_offset,
            " of the compiled form '", source, "'");
  // Without JIT (unsupported platform) pcre2_match falls back to the interpreter.
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

bool Regex::find(std::string_view text, size_t from, Match& match) const {
  thread_local ThreadMatchState state;
  while (from <= text.size()) {
    const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from,
                               PCRE2_NO_UTF_CHECK, state.match_data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    JET_CHECK(rc >= 0, "regex match failed at byte ", from, ": ", pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.match_data);
    match = {ovector[0], ovector[1]};
    if (match.end > match.start) return true;
    if (match.start == text.size()) return false;
    // An empty match yields no piece: look again from the next character.
    from = match.start + utf8::decode_one(text, match.start).length;
  }
  return false;
}

}  // namespace jet::tokenizer
