// Expression parser (see jinja_expression_parser.h), one function per precedence level.
#include "chat/jinja_expression_parser.h"

#include <algorithm>
#include <charconv>

#include "chat/jinja_filters.h"
#include "chat/jinja_strings.h"

namespace jet::jinja {
namespace {

using ast::Expr;
using ast::ExprPtr;

template <typename Node>
ExprPtr make_expr(Node node, SourcePos pos) {
  return std::make_unique<Expr>(Expr{std::move(node), pos});
}

}  // namespace

bool ExpressionParser::at_tuple_end(const std::vector<std::string_view>& extra_end) const {
  const Token& token = stream_.current();
  if (token.type == TokenType::kVariableEnd || token.type == TokenType::kBlockEnd || TokenStream::is_op(token, ")"))
    return true;
  return token.type == TokenType::kName && std::find(extra_end.begin(), extra_end.end(), token.text) != extra_end.end();
}

ExprPtr ExpressionParser::parse_tuple(bool with_condexpr, const std::vector<std::string_view>& extra_end,
                                      bool parenthesized) {
  const Token& start = stream_.current();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) stream_.expect_op(",");
    if (at_tuple_end(extra_end)) break;
    items.push_back(with_condexpr ? parse_expression() : parse_or());
    if (!stream_.at_op(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items.front());
    if (!parenthesized) stream_.fail(stream_.current(), "expected an expression, got " + describe(stream_.current()));
  }
  return make_expr(ast::ListLiteral{std::move(items)}, start.pos);
}

ExprPtr ExpressionParser::parse_expression() {
  ExprPtr expr = parse_or();
  while (stream_.at_name("if")) {
    const SourcePos pos = stream_.advance().pos;
    ExprPtr condition = parse_or();
    ExprPtr otherwise;
    if (stream_.at_name("else")) {  // `a if b else c if d else ...` recurses here
      const Token& token = stream_.advance();
      TokenStream::NestingGuard guard(stream_, token);
      otherwise = parse_expression();
    }
    expr = make_expr(ast::Conditional{std::move(condition), std::move(expr), std::move(otherwise)}, pos);
  }
  return expr;
}

ExprPtr ExpressionParser::parse_or() {
  ExprPtr left = parse_and();
  while (stream_.at_name("or")) {
    const SourcePos pos = stream_.advance().pos;
    left = make_expr(ast::Binary{ast::BinaryOp::kOr, std::move(left), parse_and()}, pos);
  }
  return left;
}

ExprPtr ExpressionParser::parse_and() {
  ExprPtr left = parse_not();
  while (stream_.at_name("and")) {
    const SourcePos pos = stream_.advance().pos;
    left = make_expr(ast::Binary{ast::BinaryOp::kAnd, std::move(left), parse_not()}, pos);
  }
  return left;
}

ExprPtr ExpressionParser::parse_not() {
  if (!stream_.at_name("not")) return parse_compare();
  const Token& token = stream_.advance();
  TokenStream::NestingGuard guard(stream_, token);
  return make_expr(ast::Unary{ast::UnaryOp::kNot, parse_not()}, token.pos);
}

ExprPtr ExpressionParser::parse_compare() {
  static const std::pair<std::string_view, ast::CompareOp> kOperators[] = {
      {"==", ast::CompareOp::kEqual},     {"!=", ast::CompareOp::kNotEqual}, {"<", ast::CompareOp::kLess},
      {"<=", ast::CompareOp::kLessEqual}, {">", ast::CompareOp::kGreater},   {">=", ast::CompareOp::kGreaterEqual}};
  const SourcePos pos = stream_.current().pos;
  ExprPtr first = parse_math1();
  std::vector<std::pair<ast::CompareOp, ExprPtr>> rest;
  while (true) {
    const auto found = std::find_if(std::begin(kOperators), std::end(kOperators),
                                    [&](const auto& entry) { return stream_.at_op(entry.first); });
    ast::CompareOp op;
    if (found != std::end(kOperators)) {
      stream_.advance();
      op = found->second;
    } else if (stream_.skip_name("in")) {
      op = ast::CompareOp::kIn;
    } else if (stream_.at_name("not") && TokenStream::is_name(stream_.peek(), "in")) {
      stream_.advance();
      stream_.advance();
      op = ast::CompareOp::kNotIn;
    } else {
      break;
    }
    rest.emplace_back(op, parse_math1());
  }
  if (rest.empty()) return first;
  return make_expr(ast::Compare{std::move(first), std::move(rest)}, pos);
}

template <typename Next>
ExprPtr ExpressionParser::parse_binary_level(
    std::initializer_list<std::pair<std::string_view, ast::BinaryOp>> operators, Next next) {
  ExprPtr left = (this->*next)();
  while (true) {
    const auto found =
        std::find_if(operators.begin(), operators.end(), [&](const auto& entry) { return stream_.at_op(entry.first); });
    if (found == operators.end()) return left;
    const SourcePos pos = stream_.advance().pos;
    left = make_expr(ast::Binary{found->second, std::move(left), (this->*next)()}, pos);
  }
}

ExprPtr ExpressionParser::parse_math1() {
  return parse_binary_level({{"+", ast::BinaryOp::kAdd}, {"-", ast::BinaryOp::kSubtract}},
                            &ExpressionParser::parse_concat);
}
ExprPtr ExpressionParser::parse_concat() {
  return parse_binary_level({{"~", ast::BinaryOp::kConcat}}, &ExpressionParser::parse_math2);
}
ExprPtr ExpressionParser::parse_math2() {
  return parse_binary_level({{"*", ast::BinaryOp::kMultiply},
                             {"/", ast::BinaryOp::kDivide},
                             {"//", ast::BinaryOp::kFloorDivide},
                             {"%", ast::BinaryOp::kModulo}},
                            &ExpressionParser::parse_pow);
}
ExprPtr ExpressionParser::parse_pow() {
  return parse_binary_level({{"**", ast::BinaryOp::kPower}}, &ExpressionParser::parse_unary_with_filters);
}
ExprPtr ExpressionParser::parse_unary_with_filters() { return parse_unary(true); }

// A sign applies before filters: `-x|abs` is abs(-x), as in Jinja.
ExprPtr ExpressionParser::parse_unary(bool with_filters) {
  const Token& token = stream_.current();
  TokenStream::NestingGuard guard(stream_, token);
  ExprPtr node;
  if (stream_.at_op("-") || stream_.at_op("+")) {
    const ast::UnaryOp op = stream_.at_op("-") ? ast::UnaryOp::kNegate : ast::UnaryOp::kPlus;
    stream_.advance();
    node = make_expr(ast::Unary{op, parse_unary(false)}, token.pos);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  return with_filters ? parse_filters(std::move(node)) : std::move(node);
}

ExprPtr ExpressionParser::parse_primary() {
  const Token& token = stream_.current();
  switch (token.type) {
    case TokenType::kName: {
      stream_.advance();
      if (token.text == "true" || token.text == "True") return make_expr(ast::Literal{Value::boolean(true)}, token.pos);
      if (token.text == "false" || token.text == "False")
        return make_expr(ast::Literal{Value::boolean(false)}, token.pos);
      if (token.text == "none" || token.text == "None") return make_expr(ast::Literal{Value::none()}, token.pos);
      return make_expr(ast::Name{token.text}, token.pos);
    }
    case TokenType::kString: {
      std::string text;
      while (stream_.current().type == TokenType::kString) text += stream_.advance().text;  // 'a' 'b' == 'ab'
      return make_expr(ast::Literal{Value::string(std::move(text))}, token.pos);
    }
    case TokenType::kInteger: {
      stream_.advance();
      int64_t value = 0;
      const auto result = std::from_chars(token.text.data(), token.text.data() + token.text.size(), value);
      if (result.ec != std::errc()) stream_.fail(token, "integer literal " + token.text + " is too large");
      return make_expr(ast::Literal{Value::integer(value)}, token.pos);
    }
    case TokenType::kFloat: {
      stream_.advance();
      const std::optional<double> value = parse_python_float(token.text);
      if (!value) stream_.fail(token, "bad float literal " + token.text);
      return make_expr(ast::Literal{Value::number(*value)}, token.pos);
    }
    case TokenType::kOperator:
      if (token.text == "(") {
        stream_.advance();
        ExprPtr node = parse_tuple(true, {}, true);
        stream_.expect_op(")");
        return node;
      }
      if (token.text == "[") return parse_list();
      if (token.text == "{") return parse_dict();
      break;
    default:
      break;
  }
  stream_.fail(token, "unexpected " + describe(token));
}

ExprPtr ExpressionParser::parse_list() {
  const SourcePos pos = stream_.advance().pos;
  std::vector<ExprPtr> items;
  while (!stream_.at_op("]")) {
    if (!items.empty()) stream_.expect_op(",");
    if (stream_.at_op("]")) break;  // trailing comma
    items.push_back(parse_expression());
  }
  stream_.expect_op("]");
  return make_expr(ast::ListLiteral{std::move(items)}, pos);
}

ExprPtr ExpressionParser::parse_dict() {
  const SourcePos pos = stream_.advance().pos;
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  while (!stream_.at_op("}")) {
    if (!items.empty()) stream_.expect_op(",");
    if (stream_.at_op("}")) break;  // trailing comma
    ExprPtr key = parse_expression();
    stream_.expect_op(":");
    items.emplace_back(std::move(key), parse_expression());
  }
  stream_.expect_op("}");
  return make_expr(ast::DictLiteral{std::move(items)}, pos);
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr node) {
  while (true) {
    const Token& token = stream_.current();
    if (TokenStream::is_op(token, ".")) {
      stream_.advance();
      const Token& attribute = stream_.current();
      if (attribute.type == TokenType::kName) {
        node = make_expr(ast::GetAttr{std::move(node), stream_.advance().text}, token.pos);
      } else if (attribute.type == TokenType::kInteger) {
        node = make_expr(ast::GetItem{std::move(node), parse_primary()}, token.pos);  // foo.0 == foo[0]
      } else {
        stream_.fail(attribute, "expected a name or number after '.', got " + describe(attribute));
      }
    } else if (TokenStream::is_op(token, "[")) {
      node = parse_subscript(std::move(node));
    } else if (TokenStream::is_op(token, "(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr object) {
  const SourcePos pos = stream_.advance().pos;
  ExprPtr start;
  if (!stream_.at_op(":")) {
    start = parse_expression();
    if (stream_.skip_op("]")) return make_expr(ast::GetItem{std::move(object), std::move(start)}, pos);
    if (stream_.at_op(",")) stream_.fail(stream_.current(), "tuple subscripts are not supported");
  }
  stream_.expect_op(":");
  ExprPtr stop;
  ExprPtr step;
  if (!stream_.at_op(":") && !stream_.at_op("]")) stop = parse_expression();
  if (stream_.skip_op(":") && !stream_.at_op("]")) step = parse_expression();
  stream_.expect_op("]");
  return make_expr(ast::Slice{std::move(object), std::move(start), std::move(stop), std::move(step)}, pos);
}

ExprPtr ExpressionParser::parse_call(ExprPtr callee) {
  const SourcePos pos = stream_.current().pos;
  ast::CallArgs args = parse_call_args();
  return make_expr(ast::Call{std::move(callee), std::move(args)}, pos);
}

ast::CallArgs ExpressionParser::parse_call_args() {
  const Token& open = stream_.current();
  stream_.expect_op("(");
  ast::CallArgs args;
  bool need_comma = false;
  while (!stream_.at_op(")")) {
    if (need_comma) {
      stream_.expect_op(",");
      if (stream_.at_op(")")) break;  // trailing comma
    }
    if (stream_.at_op("*") || stream_.at_op("**"))
      stream_.fail(stream_.current(), "*args and **kwargs in calls are not supported");
    if (stream_.current().type == TokenType::kName && TokenStream::is_op(stream_.peek(), "=")) {
      std::string key = stream_.advance().text;
      stream_.advance();  // '='
      args.keywords.emplace_back(std::move(key), parse_expression());
    } else {
      if (!args.keywords.empty()) stream_.fail(open, "positional argument follows keyword argument");
      args.positional.push_back(parse_expression());
    }
    need_comma = true;
  }
  stream_.expect_op(")");
  return args;
}

ExprPtr ExpressionParser::parse_filters(ExprPtr node) {
  while (true) {
    const Token& token = stream_.current();
    if (TokenStream::is_op(token, "|")) {
      stream_.advance();
      const Token& name_token = stream_.current();
      std::string name = stream_.expect_name();
      if (!has_filter(name)) stream_.fail(name_token, "no filter named '" + name + "'");
      ast::CallArgs args = stream_.at_op("(") ? parse_call_args() : ast::CallArgs{};
      node = make_expr(ast::Filter{std::move(node), std::move(name), std::move(args)}, token.pos);
    } else if (TokenStream::is_name(token, "is")) {
      node = parse_test(std::move(node));
    } else if (TokenStream::is_op(token, "(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

// `x is [not] name`, `x is name(args)` or `x is name arg` (one argument without parentheses).
ExprPtr ExpressionParser::parse_test(ExprPtr subject) {
  const SourcePos pos = stream_.advance().pos;
  const bool negated = stream_.skip_name("not");
  const Token& name_token = stream_.current();
  std::string name = stream_.expect_name();
  if (!has_test(name)) stream_.fail(name_token, "no test named '" + name + "'");
  ast::CallArgs args;
  const Token& next = stream_.current();
  const bool bare_argument = next.type == TokenType::kName || next.type == TokenType::kString ||
                             next.type == TokenType::kInteger || next.type == TokenType::kFloat ||
                             TokenStream::is_op(next, "[") || TokenStream::is_op(next, "{");
  if (TokenStream::is_op(next, "(")) {
    args = parse_call_args();
  } else if (bare_argument && !TokenStream::is_name(next, "else") && !TokenStream::is_name(next, "or") &&
             !TokenStream::is_name(next, "and")) {
    if (TokenStream::is_name(next, "is")) stream_.fail(next, "you cannot chain multiple tests with 'is'");
    args.positional.push_back(parse_postfix(parse_primary()));
  }
  return make_expr(ast::Test{std::move(subject), std::move(name), std::move(args), negated}, pos);
}

}  // namespace jet::jinja
