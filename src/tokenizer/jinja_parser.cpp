// Template parser (see jinja_parser.h): a recursive-descent parser that mirrors the structure of
// Jinja2's own parser, one function per precedence level.
#include "tokenizer/jinja_parser.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "core/error.h"
#include "tokenizer/jinja_filters.h"

namespace jet::jinja {
namespace {

using ast::Expr;
using ast::ExprPtr;

// Deeper nesting of expressions or blocks is refused instead of risking the stack.
constexpr int kMaxNesting = 200;

template <typename Node>
ExprPtr make_expr(Node node, SourcePos pos) {
  return std::make_unique<Expr>(Expr{std::move(node), pos});
}

std::string describe(const Token& token) {
  switch (token.type) {
    case TokenType::kText: return "template text";
    case TokenType::kVariableBegin: return "begin of print statement";
    case TokenType::kVariableEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "begin of statement block";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kString: return "string literal";
    case TokenType::kInteger:
    case TokenType::kFloat: return "number " + token.text;
    case TokenType::kEnd: return "end of template";
    case TokenType::kName:
    case TokenType::kOperator: return "'" + token.text + "'";
  }
  return "token";
}

std::string join_tags(const std::vector<std::string>& tags) {
  std::string out;
  for (const std::string& tag : tags) out += (out.empty() ? "'" : " or '") + tag + "'";
  return out;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  ast::Body parse_template() { return parse_body({}); }

 private:
  // RAII depth counter for recursive descent.
  class NestingGuard {
   public:
    NestingGuard(Parser& parser, const Token& at) : parser_(parser) {
      if (++parser_.nesting_ > kMaxNesting) parser_.fail(at, str("nesting deeper than ", kMaxNesting, " levels"));
    }
    ~NestingGuard() { --parser_.nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    Parser& parser_;
  };

  // ---- token stream ----
  const Token& current() const { return tokens_[index_]; }
  const Token& peek() const { return tokens_[std::min(index_ + 1, tokens_.size() - 1)]; }
  const Token& advance() {
    const Token& token = tokens_[index_];
    if (token.type != TokenType::kEnd) ++index_;
    return token;
  }
  static bool is_op(const Token& token, std::string_view op) {
    return token.type == TokenType::kOperator && token.text == op;
  }
  static bool is_name(const Token& token, std::string_view name) {
    return token.type == TokenType::kName && token.text == name;
  }
  bool at_op(std::string_view op) const { return is_op(current(), op); }
  bool at_name(std::string_view name) const { return is_name(current(), name); }
  bool skip_op(std::string_view op) { return at_op(op) && (advance(), true); }
  bool skip_name(std::string_view name) { return at_name(name) && (advance(), true); }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail(current(), str("expected '", op, "', got ", describe(current())));
  }
  std::string expect_name() {
    if (current().type != TokenType::kName) fail(current(), "expected a name, got " + describe(current()));
    return advance().text;
  }
  void expect_block_end() {
    if (current().type != TokenType::kBlockEnd) {
      fail(current(), "expected end of statement block, got " + describe(current()));
    }
    advance();
  }
  [[noreturn]] void fail(const Token& at, const std::string& message) const {
    throw Error(located_message(at.pos, "syntax error: " + message));
  }

  // ---- statements ----

  // Parses until a block tag named in `end_tags` (left unconsumed) or, at top level, the end.
  ast::Body parse_body(std::vector<std::string> end_tags) {
    end_tags_.push_back(std::move(end_tags));
    ast::Body body;
    while (true) {
      const Token& token = current();
      if (token.type == TokenType::kText) {
        body.push_back({ast::Text{token.text}, token.pos});
        advance();
      } else if (token.type == TokenType::kVariableBegin) {
        advance();
        ExprPtr expr = parse_tuple(true, {}, false);
        if (current().type != TokenType::kVariableEnd) fail(current(), "unexpected " + describe(current()));
        advance();
        body.push_back({ast::Output{std::move(expr)}, token.pos});
      } else if (token.type == TokenType::kBlockBegin) {
        const std::vector<std::string>& ends = end_tags_.back();
        if (peek().type == TokenType::kName && std::find(ends.begin(), ends.end(), peek().text) != ends.end()) break;
        parse_statement(body);
      } else if (token.type == TokenType::kEnd) {
        if (!end_tags_.back().empty()) {
          fail(token, "unexpected end of template, expected " + join_tags(end_tags_.back()));
        }
        break;
      } else {
        fail(token, "unexpected " + describe(token));
      }
    }
    end_tags_.pop_back();
    return body;
  }

  // Consumes `{% name %}` of a closing or middle tag that parse_body stopped at; returns the name.
  std::string take_tag() {
    advance();  // block begin
    return advance().text;
  }

  void parse_statement(ast::Body& out) {
    const Token& begin = advance();
    NestingGuard guard(*this, begin);
    const Token& tag = current();
    if (tag.type != TokenType::kName) fail(tag, "expected a tag name, got " + describe(tag));
    const std::string name = advance().text;
    const SourcePos pos = begin.pos;
    if (name == "if") {
      out.push_back({parse_if(), pos});
    } else if (name == "for") {
      out.push_back({parse_for(), pos});
    } else if (name == "set") {
      out.push_back({parse_set(), pos});
    } else if (name == "macro") {
      out.push_back({parse_macro(), pos});
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail(tag, "'" + name + "' outside loop");
      expect_block_end();
      out.push_back({ast::LoopControl{name == "break"}, pos});
    } else if (name == "generation") {
      // transformers' {% generation %} only marks assistant text for training masks; its body
      // renders in place.
      expect_block_end();
      ast::Body body = parse_body({"endgeneration"});
      take_tag();
      expect_block_end();
      std::move(body.begin(), body.end(), std::back_inserter(out));
    } else {
      std::string message = "unknown tag '" + name + "'";
      if (!end_tags_.back().empty()) message += ", expected " + join_tags(end_tags_.back());
      fail(tag, message);
    }
  }

  ast::If parse_if() {
    ast::If node;
    ExprPtr condition = parse_tuple(false, {}, false);
    while (true) {
      expect_block_end();
      ast::Body body = parse_body({"elif", "else", "endif"});
      node.branches.emplace_back(std::move(condition), std::move(body));
      const std::string tag = take_tag();
      if (tag == "elif") {
        condition = parse_tuple(false, {}, false);
        continue;
      }
      if (tag == "else") {
        expect_block_end();
        node.otherwise = parse_body({"endif"});
        take_tag();
      }
      expect_block_end();
      return node;
    }
  }

  ast::For parse_for() {
    ast::For node;
    node.targets = parse_targets();
    if (!skip_name("in")) fail(current(), "expected 'in', got " + describe(current()));
    node.iterable = parse_tuple(false, {"recursive"}, false);
    if (skip_name("if")) node.condition = parse_expression();
    if (at_name("recursive")) fail(current(), "recursive loops are not supported");
    expect_block_end();
    ++loop_depth_;
    node.body = parse_body({"endfor", "else"});
    --loop_depth_;
    if (take_tag() == "else") {
      expect_block_end();
      node.otherwise = parse_body({"endfor"});
      take_tag();
    }
    expect_block_end();
    return node;
  }

  ast::Set parse_set() {
    ast::Set node;
    if (current().type == TokenType::kName && is_op(peek(), ".")) {
      node.namespace_name = advance().text;
      advance();  // the dot
      node.targets.push_back(expect_name());
    } else {
      node.targets = parse_targets();
    }
    if (skip_op("=")) {
      node.value = parse_tuple(true, {}, false);
      expect_block_end();
      return node;
    }
    if (!node.namespace_name.empty() || node.targets.size() != 1) {
      fail(current(), "expected '=' after the assignment targets");
    }
    if (at_op("|")) fail(current(), "filters on {% set %} blocks are not supported");
    expect_block_end();
    const int enclosing_loops = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot leave a captured block
    node.body = parse_body({"endset"});
    loop_depth_ = enclosing_loops;
    take_tag();
    expect_block_end();
    return node;
  }

  // Names to assign: `x`, `a, b` or `(a, b)`.
  std::vector<std::string> parse_targets() {
    const bool parenthesized = skip_op("(");
    std::vector<std::string> names;
    do {
      const Token& token = current();
      const std::string name = expect_name();
      if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" || name == "None") {
        fail(token, "can't assign to '" + name + "'");
      }
      names.push_back(name);
    } while (skip_op(",") && current().type == TokenType::kName);
    if (parenthesized) expect_op(")");
    return names;
  }

  ast::Macro parse_macro() {
    ast::Macro node;
    node.name = expect_name();
    expect_op("(");
    while (!at_op(")")) {
      if (!node.params.empty()) expect_op(",");
      const Token& token = current();
      ast::MacroParam param{expect_name(), nullptr};
      if (skip_op("=")) {
        param.default_value = parse_expression();
      } else if (!node.params.empty() && node.params.back().default_value) {
        fail(token, "non-default argument follows default argument");
      }
      node.params.push_back(std::move(param));
    }
    expect_op(")");
    expect_block_end();
    const int enclosing_loops = loop_depth_;
    loop_depth_ = 0;  // a loop around the macro definition does not make break valid inside it
    node.body = parse_body({"endmacro"});
    loop_depth_ = enclosing_loops;
    take_tag();
    expect_block_end();
    return node;
  }

  // ---- expressions ----

  bool at_tuple_end(const std::vector<std::string_view>& extra_end) const {
    const Token& token = current();
    if (token.type == TokenType::kVariableEnd || token.type == TokenType::kBlockEnd || is_op(token, ")")) return true;
    return token.type == TokenType::kName &&
           std::find(extra_end.begin(), extra_end.end(), token.text) != extra_end.end();
  }

  // Comma-separated expressions; a single one without a comma is returned as is.
  ExprPtr parse_tuple(bool with_condexpr, const std::vector<std::string_view>& extra_end, bool parenthesized) {
    const Token& start = current();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (at_tuple_end(extra_end)) break;
      items.push_back(with_condexpr ? parse_expression() : parse_or());
      if (!at_op(",")) break;
      is_tuple = true;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items.front());
      if (!parenthesized) fail(current(), "expected an expression, got " + describe(current()));
    }
    return make_expr(ast::ListLiteral{std::move(items)}, start.pos);
  }

  ExprPtr parse_expression() {
    ExprPtr expr = parse_or();
    while (at_name("if")) {
      const SourcePos pos = advance().pos;
      ExprPtr condition = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_expression() : nullptr;
      expr = make_expr(ast::Conditional{std::move(condition), std::move(expr), std::move(otherwise)}, pos);
    }
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      const SourcePos pos = advance().pos;
      left = make_expr(ast::Binary{ast::BinaryOp::kOr, std::move(left), parse_and()}, pos);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      const SourcePos pos = advance().pos;
      left = make_expr(ast::Binary{ast::BinaryOp::kAnd, std::move(left), parse_not()}, pos);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (!at_name("not")) return parse_compare();
    const Token& token = advance();
    NestingGuard guard(*this, token);
    return make_expr(ast::Unary{ast::UnaryOp::kNot, parse_not()}, token.pos);
  }

  ExprPtr parse_compare() {
    static const std::pair<std::string_view, ast::CompareOp> kOperators[] = {
        {"==", ast::CompareOp::kEqual}, {"!=", ast::CompareOp::kNotEqual},   {"<", ast::CompareOp::kLess},
        {"<=", ast::CompareOp::kLessEqual}, {">", ast::CompareOp::kGreater}, {">=", ast::CompareOp::kGreaterEqual}};
    const SourcePos pos = current().pos;
    ExprPtr first = parse_math1();
    std::vector<std::pair<ast::CompareOp, ExprPtr>> rest;
    while (true) {
      const auto found = std::find_if(std::begin(kOperators), std::end(kOperators),
                                      [&](const auto& entry) { return at_op(entry.first); });
      ast::CompareOp op;
      if (found != std::end(kOperators)) {
        advance();
        op = found->second;
      } else if (skip_name("in")) {
        op = ast::CompareOp::kIn;
      } else if (at_name("not") && is_name(peek(), "in")) {
        advance();
        advance();
        op = ast::CompareOp::kNotIn;
      } else {
        break;
      }
      rest.emplace_back(op, parse_math1());
    }
    if (rest.empty()) return first;
    return make_expr(ast::Compare{std::move(first), std::move(rest)}, pos);
  }

  // One left-associative level of binary operators.
  template <typename Next>
  ExprPtr parse_binary_level(std::initializer_list<std::pair<std::string_view, ast::BinaryOp>> operators, Next next) {
    ExprPtr left = (this->*next)();
    while (true) {
      const auto found = std::find_if(operators.begin(), operators.end(),
                                      [&](const auto& entry) { return at_op(entry.first); });
      if (found == operators.end()) return left;
      const SourcePos pos = advance().pos;
      left = make_expr(ast::Binary{found->second, std::move(left), (this->*next)()}, pos);
    }
  }

  ExprPtr parse_math1() {
    return parse_binary_level({{"+", ast::BinaryOp::kAdd}, {"-", ast::BinaryOp::kSubtract}}, &Parser::parse_concat);
  }
  ExprPtr parse_concat() { return parse_binary_level({{"~", ast::BinaryOp::kConcat}}, &Parser::parse_math2); }
  ExprPtr parse_math2() {
    return parse_binary_level({{"*", ast::BinaryOp::kMultiply},
                               {"/", ast::BinaryOp::kDivide},
                               {"//", ast::BinaryOp::kFloorDivide},
                               {"%", ast::BinaryOp::kModulo}},
                              &Parser::parse_pow);
  }
  ExprPtr parse_pow() { return parse_binary_level({{"**", ast::BinaryOp::kPower}}, &Parser::parse_unary_with_filters); }
  ExprPtr parse_unary_with_filters() { return parse_unary(true); }

  // A sign applies before filters: `-x|abs` is abs(-x), as in Jinja.
  ExprPtr parse_unary(bool with_filters) {
    const Token& token = current();
    NestingGuard guard(*this, token);
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      const ast::UnaryOp op = at_op("-") ? ast::UnaryOp::kNegate : ast::UnaryOp::kPlus;
      advance();
      node = make_expr(ast::Unary{op, parse_unary(false)}, token.pos);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    return with_filters ? parse_filters(std::move(node)) : std::move(node);
  }

  ExprPtr parse_primary() {
    const Token& token = current();
    switch (token.type) {
      case TokenType::kName: {
        advance();
        if (token.text == "true" || token.text == "True") return make_expr(ast::Literal{Value::boolean(true)}, token.pos);
        if (token.text == "false" || token.text == "False") return make_expr(ast::Literal{Value::boolean(false)}, token.pos);
        if (token.text == "none" || token.text == "None") return make_expr(ast::Literal{Value::none()}, token.pos);
        return make_expr(ast::Name{token.text}, token.pos);
      }
      case TokenType::kString: {
        std::string text;
        while (current().type == TokenType::kString) text += advance().text;  // 'a' 'b' == 'ab'
        return make_expr(ast::Literal{Value::string(std::move(text))}, token.pos);
      }
      case TokenType::kInteger: {
        advance();
        int64_t value = 0;
        const auto result = std::from_chars(token.text.data(), token.text.data() + token.text.size(), value);
        if (result.ec != std::errc()) fail(token, "integer literal " + token.text + " is too large");
        return make_expr(ast::Literal{Value::integer(value)}, token.pos);
      }
      case TokenType::kFloat:
        advance();
        return make_expr(ast::Literal{Value::number(std::strtod(token.text.c_str(), nullptr))}, token.pos);
      case TokenType::kOperator:
        if (token.text == "(") {
          advance();
          ExprPtr node = parse_tuple(true, {}, true);
          expect_op(")");
          return node;
        }
        if (token.text == "[") return parse_list();
        if (token.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    fail(token, "unexpected " + describe(token));
  }

  ExprPtr parse_list() {
    const SourcePos pos = advance().pos;
    std::vector<ExprPtr> items;
    while (!at_op("]")) {
      if (!items.empty()) expect_op(",");
      if (at_op("]")) break;  // trailing comma
      items.push_back(parse_expression());
    }
    expect_op("]");
    return make_expr(ast::ListLiteral{std::move(items)}, pos);
  }

  ExprPtr parse_dict() {
    const SourcePos pos = advance().pos;
    std::vector<std::pair<ExprPtr, ExprPtr>> items;
    while (!at_op("}")) {
      if (!items.empty()) expect_op(",");
      if (at_op("}")) break;  // trailing comma
      ExprPtr key = parse_expression();
      expect_op(":");
      items.emplace_back(std::move(key), parse_expression());
    }
    expect_op("}");
    return make_expr(ast::DictLiteral{std::move(items)}, pos);
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      const Token& token = current();
      if (is_op(token, ".")) {
        advance();
        const Token& attribute = current();
        if (attribute.type == TokenType::kName) {
          node = make_expr(ast::GetAttr{std::move(node), advance().text}, token.pos);
        } else if (attribute.type == TokenType::kInteger) {
          node = make_expr(ast::GetItem{std::move(node), parse_primary()}, token.pos);  // foo.0 == foo[0]
        } else {
          fail(attribute, "expected a name or number after '.', got " + describe(attribute));
        }
      } else if (is_op(token, "[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op(token, "(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object) {
    const SourcePos pos = advance().pos;
    ExprPtr start;
    if (!at_op(":")) {
      start = parse_expression();
      if (skip_op("]")) return make_expr(ast::GetItem{std::move(object), std::move(start)}, pos);
      if (at_op(",")) fail(current(), "tuple subscripts are not supported");
    }
    expect_op(":");
    ExprPtr stop;
    ExprPtr step;
    if (!at_op(":") && !at_op("]")) stop = parse_expression();
    if (skip_op(":") && !at_op("]")) step = parse_expression();
    expect_op("]");
    return make_expr(ast::Slice{std::move(object), std::move(start), std::move(stop), std::move(step)}, pos);
  }

  ExprPtr parse_call(ExprPtr callee) {
    const SourcePos pos = current().pos;
    ast::CallArgs args = parse_call_args();
    return make_expr(ast::Call{std::move(callee), std::move(args)}, pos);
  }

  ast::CallArgs parse_call_args() {
    const Token& open = current();
    expect_op("(");
    ast::CallArgs args;
    bool need_comma = false;
    while (!at_op(")")) {
      if (need_comma) {
        expect_op(",");
        if (at_op(")")) break;  // trailing comma
      }
      if (at_op("*") || at_op("**")) fail(current(), "*args and **kwargs in calls are not supported");
      if (current().type == TokenType::kName && is_op(peek(), "=")) {
        std::string key = advance().text;
        advance();  // '='
        args.keywords.emplace_back(std::move(key), parse_expression());
      } else {
        if (!args.keywords.empty()) fail(open, "positional argument follows keyword argument");
        args.positional.push_back(parse_expression());
      }
      need_comma = true;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_filters(ExprPtr node) {
    while (true) {
      const Token& token = current();
      if (is_op(token, "|")) {
        advance();
        const Token& name_token = current();
        std::string name = expect_name();
        if (!has_filter(name)) fail(name_token, "no filter named '" + name + "'");
        ast::CallArgs args = at_op("(") ? parse_call_args() : ast::CallArgs{};
        node = make_expr(ast::Filter{std::move(node), std::move(name), std::move(args)}, token.pos);
      } else if (is_name(token, "is")) {
        node = parse_test(std::move(node));
      } else if (is_op(token, "(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  // `x is [not] name`, `x is name(args)` or `x is name arg` (one argument without parentheses).
  ExprPtr parse_test(ExprPtr subject) {
    const SourcePos pos = advance().pos;
    const bool negated = skip_name("not");
    const Token& name_token = current();
    std::string name = expect_name();
    if (!has_test(name)) fail(name_token, "no test named '" + name + "'");
    ast::CallArgs args;
    const Token& next = current();
    const bool bare_argument = next.type == TokenType::kName || next.type == TokenType::kString ||
                               next.type == TokenType::kInteger || next.type == TokenType::kFloat ||
                               is_op(next, "[") || is_op(next, "{");
    if (is_op(next, "(")) {
      args = parse_call_args();
    } else if (bare_argument && !is_name(next, "else") && !is_name(next, "or") && !is_name(next, "and")) {
      if (is_name(next, "is")) fail(next, "you cannot chain multiple tests with 'is'");
      args.positional.push_back(parse_postfix(parse_primary()));
    }
    return make_expr(ast::Test{std::move(subject), std::move(name), std::move(args), negated}, pos);
  }

  const std::vector<Token>& tokens_;
  size_t index_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
  std::vector<std::vector<std::string>> end_tags_;  // expected closing tags of the open blocks
};

}  // namespace

ast::Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace jet::jinja
