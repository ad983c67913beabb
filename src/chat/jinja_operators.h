// Python semantics of the template operators: arithmetic, comparison, membership, attribute and
// item access, slicing and iteration, including how Jinja's Undefined behaves in each.
#pragma once

#include <string>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace jet::jinja {

// + - * / // % ** and ~ (string concatenation). `and`/`or` short-circuit and live in the interpreter.
Value binary_operation(ast::BinaryOp op, const Value& left, const Value& right);
Value negate(const Value& operand);
Value unary_plus(const Value& operand);

bool values_equal(const Value& left, const Value& right);
bool compare(ast::CompareOp op, const Value& left, const Value& right);

// obj.name: dict keys (methods such as items() come first, as in Jinja), namespace attributes,
// and str/dict methods. Missing attributes give Undefined; attributes of Undefined raise.
Value get_attribute(const Value& object, const std::string& name);
// obj[index]: list/str positions (negative from the end), dict keys; misses give Undefined.
Value get_item(const Value& object, const Value& index);
// obj[start:stop:step] on strings (by code point) and lists; each bound may be Undefined (absent).
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);

// The items a for loop or filter sees: list items, dict keys, string code points; Undefined gives
// nothing. Throws EvalError for values that are not iterable.
List iterate(const Value& value);

}  // namespace jet::jinja
