// A cursor over the lexer's tokens with the lookahead, matching and error helpers that the
// statement and expression parsers share.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_lexer.h"

namespace jet::jinja {

class TokenStream {
 public:
  explicit TokenStream(const std::vector<Token>& tokens) : tokens_(tokens) {}

  const Token& current() const { return tokens_[index_]; }
  const Token& peek() const;  // the token after current()
  const Token& advance();     // returns the token it moves past; stays on the end token

  static bool is_op(const Token& token, std::string_view op) {
    return token.type == TokenType::kOperator && token.text == op;
  }
  static bool is_name(const Token& token, std::string_view name) {
    return token.type == TokenType::kName && token.text == name;
  }
  bool at_op(std::string_view op) const { return is_op(current(), op); }
  bool at_name(std::string_view name) const { return is_name(current(), name); }
  bool skip_op(std::string_view op);
  bool skip_name(std::string_view name);
  void expect_op(std::string_view op);
  std::string expect_name();
  void expect_block_end();

  // "syntax error: ..." at the token's line and column.
  [[noreturn]] void fail(const Token& at, const std::string& message) const;

  // Counts open nesting levels (blocks, parentheses, operators) so that deeply nested input is a
  // syntax error instead of a stack overflow in the recursive-descent parsers.
  class NestingGuard {
   public:
    NestingGuard(TokenStream& stream, const Token& at);
    ~NestingGuard() { --stream_.nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    TokenStream& stream_;
  };

 private:
  const std::vector<Token>& tokens_;
  size_t index_ = 0;
  int nesting_ = 0;
};

// How a token is named in error messages: "end of print statement", "'+'", ...
std::string describe(const Token& token);

}  // namespace jet::jinja
