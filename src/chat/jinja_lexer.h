// Template lexer: splits a Jinja template into text and tag tokens, applying whitespace control
// (`{%-`, `-%}`, `{{-`, `-}}`, `{#-`, `-#}`, `+%}`, `{%+`) and the trim_blocks / lstrip_blocks options
// the way Jinja2's lexer does. Comments are dropped here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace jet::jinja {

struct SourcePos {
  int line = 1;
  int column = 1;  // in code points, 1-based
};

enum class TokenType {
  kText,           // literal template text
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifiers and keywords
  kString,         // text holds the decoded literal
  kInteger,        // text holds the digits (underscores removed)
  kFloat,          // likewise
  kOperator,       // text holds the spelling: "+", "//", "==", "(", "|", ...
  kEnd,            // end of the template
};

struct Token {
  TokenType type;
  std::string text;
  SourcePos pos;
};

// transformers renders chat templates with trim_blocks and lstrip_blocks on, hence the defaults.
struct LexerOptions {
  bool trim_blocks = true;    // drop the first newline after a block or comment tag
  bool lstrip_blocks = true;  // drop spaces and tabs before a block or comment tag that starts a line
};

// Throws jet::Error naming line and column for malformed tags (unclosed tag, comment or string,
// unbalanced brackets, unknown characters).
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options);

// The message format shared by lexer, parser and interpreter errors.
std::string located_message(const SourcePos& pos, const std::string& message);

}  // namespace jet::jinja
