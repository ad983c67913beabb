// Template parser: turns the lexer's tokens into the syntax tree with Jinja2's statement grammar
// (expressions are parsed by jinja_expression_parser.h).
#pragma once

#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace jet::jinja {

// Supported statements: if/elif/else, for (with else, an `if` filter and tuple targets), set (plain,
// tuple, namespace attribute, block), macro, break/continue, and transformers' generation tag.
// Throws jet::Error naming line and column on a syntax error or an unsupported tag.
ast::Body parse(const std::vector<Token>& tokens);

}  // namespace jet::jinja
