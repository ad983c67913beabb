// Python semantics of the template operators (see jinja_operators.h).
#include "chat/jinja_operators.h"

#include <algorithm>
#include <cmath>
#include <compare>
#include <limits>

#include "chat/jinja_methods.h"
#include "chat/jinja_strings.h"

namespace jet::jinja {
namespace {

// Results of * on strings and lists are capped so a template cannot exhaust memory.
constexpr size_t kMaxRepeatedSize = size_t{1} << 26;

[[noreturn]] void unsupported(std::string_view op, const Value& left, const Value& right) {
  throw EvalError(
      str("unsupported operand type(s) for ", op, ": '", left.type_name(), "' and '", right.type_name(), "'"));
}

void require_defined(const Value& value) {
  if (value.is_undefined()) value.fail_undefined();
}

[[noreturn]] void fail_overflow() { throw EvalError("integer overflow"); }

int64_t checked_add(int64_t a, int64_t b) {
  int64_t result = 0;
  if (__builtin_add_overflow(a, b, &result)) fail_overflow();
  return result;
}

int64_t checked_subtract(int64_t a, int64_t b) {
  int64_t result = 0;
  if (__builtin_sub_overflow(a, b, &result)) fail_overflow();
  return result;
}

int64_t checked_multiply(int64_t a, int64_t b) {
  int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) fail_overflow();
  return result;
}

bool both_integral(const Value& left, const Value& right) { return left.is_integral() && right.is_integral(); }
bool both_numbers(const Value& left, const Value& right) { return left.is_number() && right.is_number(); }

template <typename Sequence>
Sequence repeat(const Sequence& items, int64_t times) {
  Sequence out;
  if (times <= 0 || items.empty()) return out;
  if (static_cast<uint64_t>(times) > kMaxRepeatedSize / items.size()) throw EvalError("repetition result is too large");
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return out;
}

Value add(const Value& left, const Value& right) {
  if (both_integral(left, right)) return Value::integer(checked_add(left.as_int(), right.as_int()));
  if (both_numbers(left, right)) return Value::number(left.as_double() + right.as_double());
  if (left.is_string() && right.is_string()) return Value::string(left.as_string() + right.as_string());
  if (left.is_list() && right.is_list()) {
    List items = left.as_list();
    items.insert(items.end(), right.as_list().begin(), right.as_list().end());
    return Value::list(std::move(items));
  }
  unsupported("+", left, right);
}

Value subtract(const Value& left, const Value& right) {
  if (both_integral(left, right)) return Value::integer(checked_subtract(left.as_int(), right.as_int()));
  if (both_numbers(left, right)) return Value::number(left.as_double() - right.as_double());
  unsupported("-", left, right);
}

Value multiply(const Value& left, const Value& right) {
  if (both_integral(left, right)) return Value::integer(checked_multiply(left.as_int(), right.as_int()));
  if (both_numbers(left, right)) return Value::number(left.as_double() * right.as_double());
  const Value& count = left.is_integral() ? left : right;
  const Value& sequence = left.is_integral() ? right : left;
  if (count.is_integral() && sequence.is_string()) return Value::string(repeat(sequence.as_string(), count.as_int()));
  if (count.is_integral() && sequence.is_list()) return Value::list(repeat(sequence.as_list(), count.as_int()));
  unsupported("*", left, right);
}

void require_nonzero(const Value& divisor) {
  if (divisor.as_double() == 0.0) throw EvalError("division by zero");
}

// Python's float floor division and modulo: the remainder takes the divisor's sign.
std::pair<double, double> float_divmod(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, b);
  }
  double floor_div = 0.0;
  if (div != 0.0) {
    floor_div = std::floor(div);
    if (div - floor_div > 0.5) floor_div += 1.0;
  } else {
    floor_div = std::copysign(0.0, a / b);
  }
  return {floor_div, mod};
}

Value floor_divide(const Value& left, const Value& right) {
  if (!both_numbers(left, right)) unsupported("//", left, right);
  require_nonzero(right);
  if (both_integral(left, right)) {
    const int64_t a = left.as_int();
    const int64_t b = right.as_int();
    if (a == std::numeric_limits<int64_t>::min() && b == -1) fail_overflow();
    int64_t quotient = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) --quotient;
    return Value::integer(quotient);
  }
  return Value::number(float_divmod(left.as_double(), right.as_double()).first);
}

Value modulo(const Value& left, const Value& right) {
  if (!both_numbers(left, right)) {
    if (left.is_string()) throw EvalError("printf-style string formatting ('%') is not supported");
    unsupported("%", left, right);
  }
  require_nonzero(right);
  if (both_integral(left, right)) {
    const int64_t a = left.as_int();
    const int64_t b = right.as_int();
    if (b == -1) return Value::integer(0);
    int64_t remainder = a % b;
    if (remainder != 0 && ((remainder < 0) != (b < 0))) remainder += b;
    return Value::integer(remainder);
  }
  return Value::number(float_divmod(left.as_double(), right.as_double()).second);
}

Value power(const Value& left, const Value& right) {
  if (!both_numbers(left, right)) unsupported("**", left, right);
  if (both_integral(left, right) && right.as_int() >= 0) {
    int64_t base = left.as_int();
    int64_t exponent = right.as_int();
    int64_t result = 1;
    while (exponent > 0) {
      if (exponent & 1) result = checked_multiply(result, base);
      exponent >>= 1;
      if (exponent > 0) base = checked_multiply(base, base);
    }
    return Value::integer(result);
  }
  const double base = left.as_double();
  const double exponent = right.as_double();
  if (base == 0.0 && exponent < 0) throw EvalError("0.0 cannot be raised to a negative power");
  if (base < 0 && exponent != std::floor(exponent)) throw EvalError("negative number raised to a fractional power");
  return Value::number(std::pow(base, exponent));
}

std::partial_ordering order(const Value& left, const Value& right, std::string_view op) {
  require_defined(left);
  require_defined(right);
  if (both_integral(left, right)) return left.as_int() <=> right.as_int();
  if (both_numbers(left, right)) return left.as_double() <=> right.as_double();
  if (left.is_string() && right.is_string()) return left.as_string() <=> right.as_string();
  if (left.is_list() && right.is_list()) {
    const List& a = left.as_list();
    const List& b = right.as_list();
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (!values_equal(a[i], b[i])) return order(a[i], b[i], op);
    }
    return a.size() <=> b.size();
  }
  throw EvalError(
      str("'", op, "' not supported between instances of '", left.type_name(), "' and '", right.type_name(), "'"));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        throw EvalError("'in <string>' requires string as left operand, not " + item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& element : container.as_list()) {
        if (values_equal(element, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    default:
      throw EvalError("argument of type '" + container.type_name() + "' is not iterable");
  }
}

Value missing_attribute(const Value& object, const std::string& name) {
  const std::string owner = object.is_none() ? "'None'" : "'" + object.type_name() + " object'";
  return Value::undefined(owner + " has no attribute '" + name + "'");
}

// Python's slice.indices(): the first index, and how many items the slice takes.
std::pair<int64_t, int64_t> slice_range(int64_t length, const Value& start, const Value& stop, int64_t step) {
  const auto bound = [&](const Value& given, int64_t fallback, int64_t low, int64_t high) {
    if (!given.is_integral()) return fallback;
    int64_t index = given.as_int();
    if (index < 0) index += length;
    return std::clamp(index, low, high);
  };
  int64_t first = 0;
  int64_t last = 0;
  if (step > 0) {
    first = bound(start, 0, 0, length);
    last = bound(stop, length, 0, length);
    return {first, last > first ? (last - first + step - 1) / step : 0};
  }
  first = bound(start, length - 1, -1, length - 1);
  last = bound(stop, -1, -1, length - 1);
  return {first, first > last ? (first - last - step - 1) / -step : 0};
}

bool is_absent_bound(const Value& bound) { return bound.is_undefined() || bound.is_none(); }

}  // namespace

Value binary_operation(ast::BinaryOp op, const Value& left, const Value& right) {
  if (op == ast::BinaryOp::kConcat) return Value::string(to_display_string(left) + to_display_string(right));
  require_defined(left);
  require_defined(right);
  switch (op) {
    case ast::BinaryOp::kAdd:
      return add(left, right);
    case ast::BinaryOp::kSubtract:
      return subtract(left, right);
    case ast::BinaryOp::kMultiply:
      return multiply(left, right);
    case ast::BinaryOp::kDivide:
      if (!both_numbers(left, right)) unsupported("/", left, right);
      require_nonzero(right);
      return Value::number(left.as_double() / right.as_double());
    case ast::BinaryOp::kFloorDivide:
      return floor_divide(left, right);
    case ast::BinaryOp::kModulo:
      return modulo(left, right);
    case ast::BinaryOp::kPower:
      return power(left, right);
    default:
      break;
  }
  throw EvalError("internal error: logical operator reached binary_operation");
}

Value negate(const Value& operand) {
  require_defined(operand);
  if (operand.is_integral()) {
    if (operand.as_int() == std::numeric_limits<int64_t>::min()) fail_overflow();
    return Value::integer(-operand.as_int());
  }
  if (operand.is_number()) return Value::number(-operand.as_double());
  throw EvalError("bad operand type for unary -: '" + operand.type_name() + "'");
}

Value unary_plus(const Value& operand) {
  require_defined(operand);
  if (operand.is_integral()) return Value::integer(operand.as_int());
  if (operand.is_number()) return operand;
  throw EvalError("bad operand type for unary +: '" + operand.type_name() + "'");
}

bool values_equal(const Value& left, const Value& right) {
  if (both_integral(left, right)) return left.as_int() == right.as_int();
  if (both_numbers(left, right)) return left.as_double() == right.as_double();
  if (left.kind() != right.kind()) return false;
  switch (left.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return left.as_string() == right.as_string();
    case Value::Kind::kList: {
      const List& a = left.as_list();
      const List& b = right.as_list();
      return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), values_equal);
    }
    case Value::Kind::kDict: {
      const Dict& a = left.as_dict();
      const Dict& b = right.as_dict();
      if (a.size() != b.size()) return false;
      for (const auto& [key, value] : a.entries()) {
        const Value* other = b.find(key);
        if (other == nullptr || !values_equal(value, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &left.namespace_dict() == &right.namespace_dict();
    case Value::Kind::kFunction:
      return &left.as_function() == &right.as_function();
    default:
      return false;
  }
}

bool compare(ast::CompareOp op, const Value& left, const Value& right) {
  switch (op) {
    case ast::CompareOp::kEqual:
      return values_equal(left, right);
    case ast::CompareOp::kNotEqual:
      return !values_equal(left, right);
    case ast::CompareOp::kLess:
      return order(left, right, "<") < 0;
    case ast::CompareOp::kLessEqual:
      return order(left, right, "<=") <= 0;
    case ast::CompareOp::kGreater:
      return order(left, right, ">") > 0;
    case ast::CompareOp::kGreaterEqual:
      return order(left, right, ">=") >= 0;
    case ast::CompareOp::kIn:
      return contains(right, left);
    case ast::CompareOp::kNotIn:
      return !contains(right, left);
  }
  return false;
}

Value get_attribute(const Value& object, const std::string& name) {
  require_defined(object);
  if (object.kind() == Value::Kind::kNamespace) {
    const Value* found = object.as_dict().find(name);
    return found != nullptr ? *found : missing_attribute(object, name);
  }
  if (std::optional<Value> method = find_method(object, name)) return std::move(*method);
  if (object.is_dict()) {
    if (const Value* found = object.as_dict().find(name)) return *found;
  }
  return missing_attribute(object, name);
}

Value get_item(const Value& object, const Value& index) {
  require_defined(object);
  if (index.is_string() && object.is_dict()) {
    if (const Value* found = object.as_dict().find(index.as_string())) return *found;
  }
  if (index.is_integral() && (object.is_list() || object.is_string())) {
    const int64_t length = object.is_list() ? static_cast<int64_t>(object.as_list().size())
                                            : static_cast<int64_t>(code_point_count(object.as_string()));
    const int64_t position = index.as_int() < 0 ? index.as_int() + length : index.as_int();
    if (position >= 0 && position < length) {
      if (object.is_list()) return object.as_list()[static_cast<size_t>(position)];
      return Value::string(encode_utf8(decode_utf8(object.as_string()).substr(static_cast<size_t>(position), 1)));
    }
    return Value::undefined(str("'", object.type_name(), " object' has no element ", index.as_int()));
  }
  // Jinja falls back to attribute lookup for string subscripts: d['items'] finds the method.
  if (index.is_string()) return get_attribute(object, index.as_string());
  return Value::undefined(str("'", object.type_name(), " object' has no element ", to_repr(index)));
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  require_defined(object);
  for (const Value* bound : {&start, &stop, &step}) {
    if (!is_absent_bound(*bound) && !bound->is_integral()) {
      return Value::undefined("slice indices must be integers or None");
    }
  }
  const int64_t stride = is_absent_bound(step) ? 1 : step.as_int();
  if (stride == 0) throw EvalError("slice step cannot be zero");
  if (object.is_list()) {
    const List& items = object.as_list();
    const auto [first, count] = slice_range(static_cast<int64_t>(items.size()), start, stop, stride);
    List out;
    for (int64_t i = 0; i < count; ++i) out.push_back(items[static_cast<size_t>(first + i * stride)]);
    return Value::list(std::move(out));
  }
  if (object.is_string()) {
    const std::u32string code_points = decode_utf8(object.as_string());
    const auto [first, count] = slice_range(static_cast<int64_t>(code_points.size()), start, stop, stride);
    std::u32string out;
    for (int64_t i = 0; i < count; ++i) out.push_back(code_points[static_cast<size_t>(first + i * stride)]);
    return Value::string(encode_utf8(out));
  }
  return Value::undefined("'" + object.type_name() + " object' is not subscriptable");
}

List iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return value.as_list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& entry : value.as_dict().entries()) keys.push_back(Value::string(entry.first));
      return keys;
    }
    case Value::Kind::kString: {
      List characters;
      for (char32_t c : decode_utf8(value.as_string()))
        characters.push_back(Value::string(encode_utf8(std::u32string(1, c))));
      return characters;
    }
    default:
      throw EvalError("'" + value.type_name() + "' object is not iterable");
  }
}

}  // namespace jet::jinja
