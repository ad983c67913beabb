// Jinja filters and tests (see jinja_filters.h).
#include "chat/jinja_filters.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

#include "chat/jinja_arguments.h"
#include "chat/jinja_json.h"
#include "chat/jinja_operators.h"
#include "chat/jinja_strings.h"

namespace jet::jinja {
namespace {

using FilterFunction = Value (*)(const Value& subject, const Arguments& args);

Value no_argument_string_filter(const char* name, const Value& subject, const Arguments& args,
                                std::string (*transform)(std::string_view)) {
  const BoundArguments bound(name, args, {});
  return Value::string(transform(to_display_string(subject)));
}

std::optional<double> to_python_float(const Value& value) {
  if (value.is_number()) return value.as_double();
  if (value.is_string()) return parse_python_float(value.as_string());
  return std::nullopt;
}

std::optional<int64_t> truncate_to_int(double value) {
  if (!std::isfinite(value) || std::fabs(value) >= 9.2e18) return std::nullopt;
  return static_cast<int64_t>(value);
}

// ---- filters ----

Value filter_trim(const Value& subject, const Arguments& args) {
  const BoundArguments bound("trim", args, {"chars"});
  std::optional<std::string> chars;
  if (bound.has(0) && !bound[0].is_none()) chars = bound.string_at(0);
  return Value::string(python_strip(to_display_string(subject), chars, StripSide::kBoth));
}

Value filter_tojson(const Value& subject, const Arguments& args) {
  const BoundArguments bound("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonFormat format;
  format.ensure_ascii = bound[0].truthy();
  if (bound[1].is_integral()) {
    format.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, bound[1].as_int())), ' ');
  } else if (bound[1].is_string()) {
    format.indent = bound[1].as_string();
  } else if (bound.has(1) && !bound[1].is_none()) {
    throw EvalError("tojson(): indent must be an integer, a string or None");
  }
  if (bound.has(2) && !bound[2].is_none()) {
    const Value& separators = bound[2];
    if (!separators.is_list() || separators.as_list().size() != 2 || !separators.as_list()[0].is_string() ||
        !separators.as_list()[1].is_string()) {
      throw EvalError("tojson(): separators must be a pair of strings");
    }
    format.item_separator = separators.as_list()[0].as_string();
    format.key_separator = separators.as_list()[1].as_string();
  }
  format.sort_keys = bound[3].truthy();
  return Value::string(to_json_text(subject, format));
}

Value filter_length(const Value& subject, const Arguments& args) {
  const BoundArguments bound("length", args, {});
  switch (subject.kind()) {
    case Value::Kind::kUndefined:
      return Value::integer(0);
    case Value::Kind::kString:
      return Value::integer(static_cast<int64_t>(code_point_count(subject.as_string())));
    case Value::Kind::kList:
      return Value::integer(static_cast<int64_t>(subject.as_list().size()));
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      return Value::integer(static_cast<int64_t>(subject.as_dict().size()));
    default:
      throw EvalError("object of type '" + subject.type_name() + "' has no len()");
  }
}

Value filter_string(const Value& subject, const Arguments& args) {
  const BoundArguments bound("string", args, {});
  return Value::string(to_display_string(subject));
}

Value filter_default(const Value& subject, const Arguments& args) {
  const BoundArguments bound("default", args, {"default_value", "boolean"});
  const bool use_default = subject.is_undefined() || (bound[1].truthy() && !subject.truthy());
  if (!use_default) return subject;
  return bound.has(0) ? bound[0] : Value::string("");
}

Value filter_first(const Value& subject, const Arguments& args) {
  const BoundArguments bound("first", args, {});
  const List items = iterate(subject);
  return items.empty() ? Value::undefined("no first item, sequence was empty") : items.front();
}

Value filter_last(const Value& subject, const Arguments& args) {
  const BoundArguments bound("last", args, {});
  if (subject.is_undefined()) subject.fail_undefined();
  const List items = iterate(subject);
  return items.empty() ? Value::undefined("no last item, sequence was empty") : items.back();
}

// Looks up a dotted attribute path such as "function.name" ("0" parts index lists), like Jinja's
// attrgetter used by join, map, selectattr and rejectattr.
Value lookup_path(const Value& item, const std::string& path) {
  Value current = item;
  for (const std::string& part : python_split(path, std::string("."), -1)) {
    const bool all_digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    const std::optional<int64_t> index = all_digits ? parse_python_int(part) : std::nullopt;
    current = get_item(current, index ? Value::integer(*index) : Value::string(part));
  }
  return current;
}

std::string attribute_name(const BoundArguments& bound, size_t index) {
  if (bound[index].is_integral()) return std::to_string(bound[index].as_int());
  return bound.string_at(index);
}

Value filter_join(const Value& subject, const Arguments& args) {
  const BoundArguments bound("join", args, {"d", "attribute"});
  const std::string separator = bound.has(0) ? to_display_string(bound[0]) : "";
  std::string out;
  bool first = true;
  for (const Value& item : iterate(subject)) {
    if (!first) out += separator;
    first = false;
    out += to_display_string(bound.has(1) && !bound[1].is_none() ? lookup_path(item, attribute_name(bound, 1)) : item);
  }
  return Value::string(std::move(out));
}

Value filter_replace(const Value& subject, const Arguments& args) {
  const BoundArguments bound("replace", args, {"old", "new", "count"}, 2);
  const int64_t count = bound.has(2) && !bound[2].is_none() ? bound.integer_at(2) : -1;
  return Value::string(
      python_replace(to_display_string(subject), to_display_string(bound[0]), to_display_string(bound[1]), count));
}

Value filter_list(const Value& subject, const Arguments& args) {
  const BoundArguments bound("list", args, {});
  return Value::list(iterate(subject));
}

Value filter_reverse(const Value& subject, const Arguments& args) {
  const BoundArguments bound("reverse", args, {});
  if (subject.is_string()) {
    std::u32string code_points = decode_utf8(subject.as_string());
    return Value::string(encode_utf8(std::u32string(code_points.rbegin(), code_points.rend())));
  }
  List items = iterate(subject);
  return Value::list(List(items.rbegin(), items.rend()));
}

Value filter_items(const Value& subject, const Arguments& args) {
  const BoundArguments bound("items", args, {});
  if (subject.is_undefined()) return Value::list({});
  if (!subject.is_dict()) throw EvalError("items: can only get item pairs from a mapping");
  List pairs;
  for (const auto& [key, value] : subject.as_dict().entries())
    pairs.push_back(Value::list({Value::string(key), value}));
  return Value::list(std::move(pairs));
}

Value filter_abs(const Value& subject, const Arguments& args) {
  const BoundArguments bound("abs", args, {});
  if (subject.is_integral()) return subject.as_int() < 0 ? negate(subject) : Value::integer(subject.as_int());
  if (subject.is_number()) return Value::number(std::fabs(subject.as_double()));
  throw EvalError("bad operand type for abs(): '" + subject.type_name() + "'");
}

Value filter_int(const Value& subject, const Arguments& args) {
  const BoundArguments bound("int", args, {"default", "base"});
  if (bound.has(1) && bound.integer_at(1) != 10) throw EvalError("int filter: only base 10 is supported");
  const Value fallback = bound.has(0) ? bound[0] : Value::integer(0);
  if (subject.is_integral()) return Value::integer(subject.as_int());
  if (subject.is_string()) {
    if (const std::optional<int64_t> value = parse_python_int(subject.as_string())) return Value::integer(*value);
  }
  // Jinja retries through float so that "42.23" | int gives 42.
  if (const std::optional<double> number = to_python_float(subject)) {
    if (const std::optional<int64_t> value = truncate_to_int(*number)) return Value::integer(*value);
  }
  return fallback;
}

Value filter_float(const Value& subject, const Arguments& args) {
  const BoundArguments bound("float", args, {"default"});
  if (const std::optional<double> value = to_python_float(subject)) return Value::number(*value);
  return bound.has(0) ? bound[0] : Value::number(0.0);
}

// select/reject/selectattr/rejectattr: keep the items whose (attribute's) test result is `keep`.
Value filter_by_test(const char* name, const Value& subject, const Arguments& args, bool by_attribute, bool keep) {
  if (!args.keywords.empty()) throw EvalError(str(name, "(): keyword arguments are not supported"));
  const size_t first_test_arg = by_attribute ? 1 : 0;
  if (by_attribute && args.positional.empty()) throw EvalError(str(name, "(): missing the attribute name"));
  Arguments test_args;
  std::string test_name;
  if (args.positional.size() > first_test_arg) {
    const Value& test = args.positional[first_test_arg];
    if (!test.is_string()) throw EvalError(str(name, "(): the test name must be a string"));
    test_name = test.as_string();
    if (!has_test(test_name)) throw EvalError(str(name, "(): no test named '", test_name, "'"));
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(first_test_arg) + 1,
                                args.positional.end());
  }
  const std::string attribute = by_attribute ? to_display_string(args.positional[0]) : "";
  List kept;
  for (const Value& item : iterate(subject)) {
    const Value tested = by_attribute ? lookup_path(item, attribute) : item;
    const bool passed = test_name.empty() ? tested.truthy() : apply_test(test_name, tested, test_args);
    if (passed == keep) kept.push_back(item);
  }
  return Value::list(std::move(kept));
}

// map(attribute='x', default=...) looks attributes up; map('filter', args...) applies a filter.
Value filter_map(const Value& subject, const Arguments& args) {
  List mapped;
  if (!subject.truthy()) return Value::list({});
  if (args.positional.empty()) {
    const BoundArguments bound("map", args, {"attribute", "default"});
    if (!bound.has(0)) throw EvalError("map(): give a filter name or attribute=");
    const std::string attribute = attribute_name(bound, 0);
    for (const Value& item : iterate(subject)) {
      Value value = lookup_path(item, attribute);
      mapped.push_back(value.is_undefined() && bound.has(1) ? bound[1] : value);
    }
    return Value::list(std::move(mapped));
  }
  if (!args.positional[0].is_string()) throw EvalError("map(): the filter name must be a string");
  const std::string filter = args.positional[0].as_string();
  if (!has_filter(filter)) throw EvalError("map(): no filter named '" + filter + "'");
  Arguments filter_args{List(args.positional.begin() + 1, args.positional.end()), args.keywords};
  for (const Value& item : iterate(subject)) mapped.push_back(apply_filter(filter, item, filter_args));
  return Value::list(std::move(mapped));
}

const std::unordered_map<std::string_view, FilterFunction>& filters() {
  static const std::unordered_map<std::string_view, FilterFunction> table = {
      {"abs", filter_abs},
      {"capitalize",
       [](const Value& s, const Arguments& a) {
         return no_argument_string_filter("capitalize", s, a, python_capitalize);
       }},
      {"count", filter_length},
      {"d", filter_default},
      {"default", filter_default},
      {"first", filter_first},
      {"float", filter_float},
      {"int", filter_int},
      {"items", filter_items},
      {"join", filter_join},
      {"last", filter_last},
      {"length", filter_length},
      {"list", filter_list},
      {"lower",
       [](const Value& s, const Arguments& a) { return no_argument_string_filter("lower", s, a, python_lower); }},
      {"map", filter_map},
      {"reject", [](const Value& s, const Arguments& a) { return filter_by_test("reject", s, a, false, false); }},
      {"rejectattr",
       [](const Value& s, const Arguments& a) { return filter_by_test("rejectattr", s, a, true, false); }},
      {"replace", filter_replace},
      {"reverse", filter_reverse},
      {"select", [](const Value& s, const Arguments& a) { return filter_by_test("select", s, a, false, true); }},
      {"selectattr", [](const Value& s, const Arguments& a) { return filter_by_test("selectattr", s, a, true, true); }},
      {"string", filter_string},
      {"tojson", filter_tojson},
      {"trim", filter_trim},
      {"upper",
       [](const Value& s, const Arguments& a) { return no_argument_string_filter("upper", s, a, python_upper); }},
  };
  return table;
}

// ---- tests ----

using Predicate = bool (*)(const Value&);

bool is_odd_or_even(const Value& subject, bool want_odd) {
  const Value remainder = binary_operation(ast::BinaryOp::kModulo, subject, Value::integer(2));
  return values_equal(remainder, Value::integer(1)) == want_odd;
}

bool is_defined(const Value& v) { return !v.is_undefined(); }
bool is_undefined(const Value& v) { return v.is_undefined(); }
bool is_none(const Value& v) { return v.is_none(); }
bool is_boolean(const Value& v) { return v.kind() == Value::Kind::kBool; }
bool is_true(const Value& v) { return v.kind() == Value::Kind::kBool && v.as_bool(); }
bool is_false(const Value& v) { return v.kind() == Value::Kind::kBool && !v.as_bool(); }
bool is_integer(const Value& v) { return v.kind() == Value::Kind::kInt; }
bool is_float(const Value& v) { return v.kind() == Value::Kind::kFloat; }
bool is_number(const Value& v) { return v.is_number(); }
bool is_string(const Value& v) { return v.is_string(); }
bool is_mapping(const Value& v) { return v.is_dict(); }
bool is_callable(const Value& v) { return v.kind() == Value::Kind::kFunction; }
// Jinja's Undefined has __len__, __getitem__ and __iter__, so it passes these two.
bool is_sequence(const Value& v) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }
bool is_iterable(const Value& v) { return is_sequence(v); }
bool is_odd(const Value& v) { return is_odd_or_even(v, true); }
bool is_even(const Value& v) { return is_odd_or_even(v, false); }

// Tests without arguments.
const std::unordered_map<std::string_view, Predicate>& predicates() {
  static const std::unordered_map<std::string_view, Predicate> table = {
      {"boolean", is_boolean},   {"callable", is_callable}, {"defined", is_defined}, {"even", is_even},
      {"false", is_false},       {"float", is_float},       {"integer", is_integer}, {"iterable", is_iterable},
      {"mapping", is_mapping},   {"none", is_none},         {"number", is_number},   {"odd", is_odd},
      {"sequence", is_sequence}, {"string", is_string},     {"true", is_true},       {"undefined", is_undefined},
  };
  return table;
}

// Tests that compare the subject with one argument: `x is eq 3`, `x is in [1, 2]`.
const std::unordered_map<std::string_view, ast::CompareOp>& comparison_tests() {
  using ast::CompareOp;
  static const std::unordered_map<std::string_view, CompareOp> table = {
      {"==", CompareOp::kEqual},        {"eq", CompareOp::kEqual},
      {"equalto", CompareOp::kEqual},   {"!=", CompareOp::kNotEqual},
      {"ne", CompareOp::kNotEqual},     {">", CompareOp::kGreater},
      {"gt", CompareOp::kGreater},      {"greaterthan", CompareOp::kGreater},
      {">=", CompareOp::kGreaterEqual}, {"ge", CompareOp::kGreaterEqual},
      {"<", CompareOp::kLess},          {"lt", CompareOp::kLess},
      {"lessthan", CompareOp::kLess},   {"<=", CompareOp::kLessEqual},
      {"le", CompareOp::kLessEqual},    {"in", CompareOp::kIn},
  };
  return table;
}

}  // namespace

bool has_filter(std::string_view name) { return filters().count(name) != 0; }

Value apply_filter(std::string_view name, const Value& subject, const Arguments& args) {
  const auto found = filters().find(name);
  if (found == filters().end()) throw EvalError(str("no filter named '", name, "'"));
  return found->second(subject, args);
}

bool has_test(std::string_view name) {
  return predicates().count(name) != 0 || comparison_tests().count(name) != 0 || name == "divisibleby";
}

bool apply_test(std::string_view name, const Value& subject, const Arguments& args) {
  if (const auto predicate = predicates().find(name); predicate != predicates().end()) {
    const BoundArguments bound(name, args, {});
    return predicate->second(subject);
  }
  if (const auto comparison = comparison_tests().find(name); comparison != comparison_tests().end()) {
    const BoundArguments bound(name, args, {"other"}, 1);
    return compare(comparison->second, subject, bound[0]);
  }
  if (name == "divisibleby") {
    const BoundArguments bound(name, args, {"num"}, 1);
    return values_equal(binary_operation(ast::BinaryOp::kModulo, subject, bound[0]), Value::integer(0));
  }
  throw EvalError(str("no test named '", name, "'"));
}

}  // namespace jet::jinja
