// Expression parser: Jinja2's expression grammar and operator precedence, lowest first:
// inline if < or < and < not < comparisons (==, <, in, not in, ...) < + - < ~ < * / // % < **
// < unary -/+ < filters and tests (x | f, x is t) < postfix (a.b, a[b], a[b:c], f(x)) < literals.
#pragma once

#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_token_stream.h"

namespace jet::jinja {

class ExpressionParser {
 public:
  explicit ExpressionParser(TokenStream& stream) : stream_(stream) {}

  // Comma-separated expressions (a tuple, represented as a list), or a single one as is.
  // Without `with_condexpr` the items are parsed without inline if (as after `for ... in`);
  // names in `extra_end` end the tuple; `parenthesized` allows the empty tuple `()`.
  ast::ExprPtr parse_tuple(bool with_condexpr, const std::vector<std::string_view>& extra_end, bool parenthesized);
  ast::ExprPtr parse_expression();  // with inline if
  ast::ExprPtr parse_or();          // without inline if

 private:
  using ExprPtr = ast::ExprPtr;

  bool at_tuple_end(const std::vector<std::string_view>& extra_end) const;
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  // One left-associative level of binary operators over the next-higher level `next`.
  template <typename Next>
  ExprPtr parse_binary_level(std::initializer_list<std::pair<std::string_view, ast::BinaryOp>> operators, Next next);
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary_with_filters();
  ExprPtr parse_unary(bool with_filters);
  ExprPtr parse_primary();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr object);
  ExprPtr parse_call(ExprPtr callee);
  ast::CallArgs parse_call_args();
  ExprPtr parse_filters(ExprPtr node);
  ExprPtr parse_test(ExprPtr subject);

  TokenStream& stream_;
};

}  // namespace jet::jinja
