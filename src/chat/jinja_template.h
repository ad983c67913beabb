// A Jinja template parsed once and rendered many times: the entry point of the chat-template
// interpreter (lexer -> parser -> interpreter).
#pragma once

#include <string>
#include <string_view>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_value.h"

namespace jet::jinja {

class Template {
 public:
  // Throws jet::Error naming line and column on a syntax error.
  explicit Template(std::string_view source, const LexerOptions& options = {});

  // Renders with `context` as the template variables. Throws jet::Error on runtime errors
  // (with line and column) and TemplateRaisedError for raise_exception().
  std::string render(const Dict& context) const;

 private:
  ast::Body body_;
};

}  // namespace jet::jinja
