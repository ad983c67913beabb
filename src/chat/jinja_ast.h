// Syntax tree of a parsed chat template: expressions and statements, each with the source
// position that runtime errors report.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "chat/jinja_lexer.h"
#include "chat/jinja_value.h"

namespace jet::jinja::ast {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Arguments as written at a call, filter or test site.
struct CallArgs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
};

struct Literal {
  Value value;
};

struct Name {
  std::string name;
};

// [a, b], and also tuples (a, b): templates see both as lists.
struct ListLiteral {
  std::vector<ExprPtr> items;
};

struct DictLiteral {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

// object.attribute
struct GetAttr {
  ExprPtr object;
  std::string attribute;
};

// object[index]
struct GetItem {
  ExprPtr object;
  ExprPtr index;
};

// object[start:stop:step]; absent parts are null.
struct Slice {
  ExprPtr object;
  ExprPtr start, stop, step;
};

struct Call {
  ExprPtr callee;
  CallArgs args;
};

// subject | name(args)
struct Filter {
  ExprPtr subject;
  std::string name;
  CallArgs args;
};

// subject is [not] name(args)
struct Test {
  ExprPtr subject;
  std::string name;
  CallArgs args;
  bool negated;
};

enum class UnaryOp { kNot, kNegate, kPlus };
struct Unary {
  UnaryOp op;
  ExprPtr operand;
};

enum class BinaryOp { kAnd, kOr, kAdd, kSubtract, kMultiply, kDivide, kFloorDivide, kModulo, kPower, kConcat };
struct Binary {
  BinaryOp op;
  ExprPtr left, right;
};

enum class CompareOp { kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual, kIn, kNotIn };
// a < b <= c: each operator compares its operand with the previous one, as in Python.
struct Compare {
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

// `then if condition else otherwise`; otherwise may be null.
struct Conditional {
  ExprPtr condition, then, otherwise;
};

struct Expr {
  std::variant<Literal, Name, ListLiteral, DictLiteral, GetAttr, GetItem, Slice, Call, Filter, Test, Unary, Binary,
               Compare, Conditional>
      node;
  SourcePos pos;
};

struct Stmt;
using Body = std::vector<Stmt>;

struct Text {
  std::string text;
};

// {{ expr }}
struct Output {
  ExprPtr expr;
};

// if / elif ... / else
struct If {
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body otherwise;
};

struct For {
  std::vector<std::string> targets;  // one name, or several unpacked from each item
  ExprPtr iterable;
  ExprPtr condition;  // {% for x in xs if cond %}; may be null
  Body body;
  Body otherwise;  // runs when no item passed
};

// {% set x = v %}, {% set a, b = v %}, {% set ns.attr = v %} (namespace_name set),
// or {% set x %}body{% endset %} (value null).
struct Set {
  std::vector<std::string> targets;
  std::string namespace_name;
  ExprPtr value;
  Body body;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Macro {
  std::string name;
  std::vector<MacroParam> params;
  Body body;
};

// {% break %} / {% continue %}
struct LoopControl {
  bool is_break;
};

// transformers' {% generation %}...{% endgeneration %}: it marks assistant text for training
// masks; rendering shows the body in place, in its own scope (it is a call block in Jinja).
struct Generation {
  Body body;
};

struct Stmt {
  std::variant<Text, Output, If, For, Set, Macro, LoopControl, Generation> node;
  SourcePos pos;
};

}  // namespace jet::jinja::ast
