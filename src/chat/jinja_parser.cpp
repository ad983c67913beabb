// Template parser (see jinja_parser.h): statements and template text, mirroring Jinja2's parser;
// expressions go to the ExpressionParser.
#include "chat/jinja_parser.h"

#include <algorithm>

#include "chat/jinja_expression_parser.h"
#include "chat/jinja_token_stream.h"

namespace jet::jinja {
namespace {

using ast::ExprPtr;

std::string join_tags(const std::vector<std::string>& tags) {
  std::string out;
  for (const std::string& tag : tags) out += (out.empty() ? "'" : " or '") + tag + "'";
  return out;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : stream_(tokens), expressions_(stream_) {}

  ast::Body parse_template() { return parse_body({}); }

 private:
  // Parses until a block tag named in `end_tags` (left unconsumed) or, at top level, the end.
  ast::Body parse_body(std::vector<std::string> end_tags) {
    end_tags_.push_back(std::move(end_tags));
    ast::Body body;
    while (true) {
      const Token& token = stream_.current();
      if (token.type == TokenType::kText) {
        body.push_back({ast::Text{token.text}, token.pos});
        stream_.advance();
      } else if (token.type == TokenType::kVariableBegin) {
        stream_.advance();
        ExprPtr expr = expressions_.parse_tuple(true, {}, false);
        if (stream_.current().type != TokenType::kVariableEnd)
          stream_.fail(stream_.current(), "unexpected " + describe(stream_.current()));
        stream_.advance();
        body.push_back({ast::Output{std::move(expr)}, token.pos});
      } else if (token.type == TokenType::kBlockBegin) {
        const std::vector<std::string>& ends = end_tags_.back();
        if (stream_.peek().type == TokenType::kName &&
            std::find(ends.begin(), ends.end(), stream_.peek().text) != ends.end())
          break;
        parse_statement(body);
      } else if (token.type == TokenType::kEnd) {
        if (!end_tags_.back().empty()) {
          stream_.fail(token, "unexpected end of template, expected " + join_tags(end_tags_.back()));
        }
        break;
      } else {
        stream_.fail(token, "unexpected " + describe(token));
      }
    }
    end_tags_.pop_back();
    return body;
  }

  // Consumes `{% name %}` of a closing or middle tag that parse_body stopped at; returns the name.
  std::string take_tag() {
    stream_.advance();  // block begin
    return stream_.advance().text;
  }

  void parse_statement(ast::Body& out) {
    const Token& begin = stream_.advance();
    TokenStream::NestingGuard guard(stream_, begin);
    const Token& tag = stream_.current();
    if (tag.type != TokenType::kName) stream_.fail(tag, "expected a tag name, got " + describe(tag));
    const std::string name = stream_.advance().text;
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
      if (loop_depth_ == 0) stream_.fail(tag, "'" + name + "' outside loop");
      stream_.expect_block_end();
      out.push_back({ast::LoopControl{name == "break"}, pos});
    } else if (name == "generation") {
      out.push_back({parse_generation(), pos});
    } else {
      std::string message = "unknown tag '" + name + "'";
      if (!end_tags_.back().empty()) message += ", expected " + join_tags(end_tags_.back());
      stream_.fail(tag, message);
    }
  }

  ast::Generation parse_generation() {
    stream_.expect_block_end();
    const int enclosing_loops = loop_depth_;
    loop_depth_ = 0;  // the body is a call block: break/continue cannot leave it
    ast::Generation node{parse_body({"endgeneration"})};
    loop_depth_ = enclosing_loops;
    take_tag();
    stream_.expect_block_end();
    return node;
  }

  ast::If parse_if() {
    ast::If node;
    ExprPtr condition = expressions_.parse_tuple(false, {}, false);
    while (true) {
      stream_.expect_block_end();
      ast::Body body = parse_body({"elif", "else", "endif"});
      node.branches.emplace_back(std::move(condition), std::move(body));
      const std::string tag = take_tag();
      if (tag == "elif") {
        condition = expressions_.parse_tuple(false, {}, false);
        continue;
      }
      if (tag == "else") {
        stream_.expect_block_end();
        node.otherwise = parse_body({"endif"});
        take_tag();
      }
      stream_.expect_block_end();
      return node;
    }
  }

  ast::For parse_for() {
    ast::For node;
    node.targets = parse_targets();
    if (!stream_.skip_name("in")) stream_.fail(stream_.current(), "expected 'in', got " + describe(stream_.current()));
    node.iterable = expressions_.parse_tuple(false, {"recursive"}, false);
    if (stream_.skip_name("if")) node.condition = expressions_.parse_expression();
    if (stream_.at_name("recursive")) stream_.fail(stream_.current(), "recursive loops are not supported");
    stream_.expect_block_end();
    ++loop_depth_;
    node.body = parse_body({"endfor", "else"});
    --loop_depth_;
    if (take_tag() == "else") {
      stream_.expect_block_end();
      node.otherwise = parse_body({"endfor"});
      take_tag();
    }
    stream_.expect_block_end();
    return node;
  }

  ast::Set parse_set() {
    ast::Set node;
    if (stream_.current().type == TokenType::kName && TokenStream::is_op(stream_.peek(), ".")) {
      node.namespace_name = stream_.advance().text;
      stream_.advance();  // the dot
      node.targets.push_back(stream_.expect_name());
    } else {
      node.targets = parse_targets();
    }
    if (stream_.skip_op("=")) {
      node.value = expressions_.parse_tuple(true, {}, false);
      stream_.expect_block_end();
      return node;
    }
    if (!node.namespace_name.empty() || node.targets.size() != 1) {
      stream_.fail(stream_.current(), "expected '=' after the assignment targets");
    }
    if (stream_.at_op("|")) stream_.fail(stream_.current(), "filters on {% set %} blocks are not supported");
    stream_.expect_block_end();
    const int enclosing_loops = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot leave a captured block
    node.body = parse_body({"endset"});
    loop_depth_ = enclosing_loops;
    take_tag();
    stream_.expect_block_end();
    return node;
  }

  // Names to assign: `x`, `a, b` or `(a, b)`.
  std::vector<std::string> parse_targets() {
    const bool parenthesized = stream_.skip_op("(");
    std::vector<std::string> names;
    do {
      const Token& token = stream_.current();
      const std::string name = stream_.expect_name();
      if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" || name == "None") {
        stream_.fail(token, "can't assign to '" + name + "'");
      }
      names.push_back(name);
    } while (stream_.skip_op(",") && stream_.current().type == TokenType::kName);
    if (parenthesized) stream_.expect_op(")");
    return names;
  }

  ast::Macro parse_macro() {
    ast::Macro node;
    node.name = stream_.expect_name();
    stream_.expect_op("(");
    while (!stream_.at_op(")")) {
      if (!node.params.empty()) stream_.expect_op(",");
      const Token& token = stream_.current();
      ast::MacroParam param{stream_.expect_name(), nullptr};
      if (stream_.skip_op("=")) {
        param.default_value = expressions_.parse_expression();
      } else if (!node.params.empty() && node.params.back().default_value) {
        stream_.fail(token, "non-default argument follows default argument");
      }
      node.params.push_back(std::move(param));
    }
    stream_.expect_op(")");
    stream_.expect_block_end();
    const int enclosing_loops = loop_depth_;
    loop_depth_ = 0;  // a loop around the macro definition does not make break valid inside it
    node.body = parse_body({"endmacro"});
    loop_depth_ = enclosing_loops;
    take_tag();
    stream_.expect_block_end();
    return node;
  }

  TokenStream stream_;
  ExpressionParser expressions_;
  int loop_depth_ = 0;
  std::vector<std::vector<std::string>> end_tags_;  // expected closing tags of the open blocks
};

}  // namespace

ast::Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace jet::jinja
