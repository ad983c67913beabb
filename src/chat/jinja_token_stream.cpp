// Token cursor shared by the parsers (see jinja_token_stream.h).
#include "chat/jinja_token_stream.h"

#include <algorithm>

#include "core/error.h"

namespace jet::jinja {
namespace {

constexpr int kMaxNesting = 200;

}  // namespace

const Token& TokenStream::peek() const { return tokens_[std::min(index_ + 1, tokens_.size() - 1)]; }

const Token& TokenStream::advance() {
  const Token& token = tokens_[index_];
  if (token.type != TokenType::kEnd) ++index_;
  return token;
}

bool TokenStream::skip_op(std::string_view op) {
  if (!at_op(op)) return false;
  advance();
  return true;
}

bool TokenStream::skip_name(std::string_view name) {
  if (!at_name(name)) return false;
  advance();
  return true;
}

void TokenStream::expect_op(std::string_view op) {
  if (!skip_op(op)) fail(current(), str("expected '", op, "', got ", describe(current())));
}

std::string TokenStream::expect_name() {
  if (current().type != TokenType::kName) fail(current(), "expected a name, got " + describe(current()));
  return advance().text;
}

void TokenStream::expect_block_end() {
  if (current().type != TokenType::kBlockEnd)
    fail(current(), "expected end of statement block, got " + describe(current()));
  advance();
}

void TokenStream::fail(const Token& at, const std::string& message) const {
  throw Error(located_message(at.pos, "syntax error: " + message));
}

TokenStream::NestingGuard::NestingGuard(TokenStream& stream, const Token& at) : stream_(stream) {
  if (++stream_.nesting_ > kMaxNesting) {
    --stream_.nesting_;
    stream_.fail(at, str("nesting deeper than ", kMaxNesting, " levels"));
  }
}

std::string describe(const Token& token) {
  switch (token.type) {
    case TokenType::kText:
      return "template text";
    case TokenType::kVariableBegin:
      return "begin of print statement";
    case TokenType::kVariableEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kString:
      return "string literal";
    case TokenType::kInteger:
    case TokenType::kFloat:
      return "number " + token.text;
    case TokenType::kEnd:
      return "end of template";
    case TokenType::kName:
    case TokenType::kOperator:
      return "'" + token.text + "'";
  }
  return "token";
}

}  // namespace jet::jinja
