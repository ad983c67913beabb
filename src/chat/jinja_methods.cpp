// str and dict methods for templates (see jinja_methods.h).
#include "chat/jinja_methods.h"

#include <string_view>
#include <unordered_map>

#include "chat/jinja_arguments.h"
#include "chat/jinja_strings.h"

namespace jet::jinja {
namespace {

using Method = Value (*)(const Value& self, const Arguments& args);

std::optional<std::string> optional_string(const BoundArguments& bound, size_t index) {
  if (!bound.has(index) || bound[index].is_none()) return std::nullopt;
  return bound.string_at(index);
}

// startswith/endswith accept one string or a tuple (list) of candidates.
Value affix_test(const Value& self, const Arguments& args, const char* name, bool at_start) {
  const BoundArguments bound(name, args, {"affix"}, 1);
  const std::string& text = self.as_string();
  const auto matches = [&](const Value& candidate) {
    if (!candidate.is_string()) {
      throw EvalError(str(name, "() argument must be str or a tuple of str, not ", candidate.type_name()));
    }
    const std::string& affix = candidate.as_string();
    if (affix.size() > text.size()) return false;
    return at_start ? text.compare(0, affix.size(), affix) == 0
                    : text.compare(text.size() - affix.size(), affix.size(), affix) == 0;
  };
  if (bound[0].is_list()) {
    for (const Value& candidate : bound[0].as_list()) {
      if (matches(candidate)) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  return Value::boolean(matches(bound[0]));
}

Value strip_method(const Value& self, const Arguments& args, const char* name, StripSide side) {
  const BoundArguments bound(name, args, {"chars"});
  return Value::string(python_strip(self.as_string(), optional_string(bound, 0), side));
}

Value split_method(const Value& self, const Arguments& args) {
  const BoundArguments bound("split", args, {"sep", "maxsplit"});
  const int64_t maxsplit = bound.has(1) ? bound.integer_at(1) : -1;
  const std::optional<std::string> separator = optional_string(bound, 0);
  if (separator && separator->empty()) throw EvalError("split(): empty separator");
  List parts;
  for (std::string& part : python_split(self.as_string(), separator, maxsplit)) {
    parts.push_back(Value::string(std::move(part)));
  }
  return Value::list(std::move(parts));
}

Value replace_method(const Value& self, const Arguments& args) {
  const BoundArguments bound("replace", args, {"old", "new", "count"}, 2);
  const int64_t count = bound.has(2) ? bound.integer_at(2) : -1;
  return Value::string(python_replace(self.as_string(), bound.string_at(0), bound.string_at(1), count));
}

Value join_method(const Value& self, const Arguments& args) {
  const BoundArguments bound("join", args, {"iterable"}, 1);
  if (!bound[0].is_list()) throw EvalError("join() argument must be a list of strings, not " + bound[0].type_name());
  std::string out;
  const List& items = bound[0].as_list();
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      throw EvalError(str("sequence item ", i, ": expected str instance, ", items[i].type_name(), " found"));
    }
    if (i > 0) out += self.as_string();
    out += items[i].as_string();
  }
  return Value::string(std::move(out));
}

Value case_method(const Value& self, const Arguments& args, const char* name,
                  std::string (*transform)(std::string_view)) {
  const BoundArguments bound(name, args, {});
  return Value::string(transform(self.as_string()));
}

Value dict_items(const Value& self, const Arguments& args) {
  const BoundArguments bound("items", args, {});
  List pairs;
  for (const auto& [key, value] : self.as_dict().entries()) pairs.push_back(Value::list({Value::string(key), value}));
  return Value::list(std::move(pairs));
}

Value dict_keys(const Value& self, const Arguments& args) {
  const BoundArguments bound("keys", args, {});
  List keys;
  for (const auto& entry : self.as_dict().entries()) keys.push_back(Value::string(entry.first));
  return Value::list(std::move(keys));
}

Value dict_values(const Value& self, const Arguments& args) {
  const BoundArguments bound("values", args, {});
  List values;
  for (const auto& entry : self.as_dict().entries()) values.push_back(entry.second);
  return Value::list(std::move(values));
}

Value dict_get(const Value& self, const Arguments& args) {
  const BoundArguments bound("get", args, {"key", "default"}, 1);
  const Value* found = bound[0].is_string() ? self.as_dict().find(bound[0].as_string()) : nullptr;
  if (found != nullptr) return *found;
  return bound.has(1) ? bound[1] : Value::none();
}

const std::unordered_map<std::string_view, Method>& string_methods() {
  static const std::unordered_map<std::string_view, Method> methods = {
      {"startswith", [](const Value& s, const Arguments& a) { return affix_test(s, a, "startswith", true); }},
      {"endswith", [](const Value& s, const Arguments& a) { return affix_test(s, a, "endswith", false); }},
      {"strip", [](const Value& s, const Arguments& a) { return strip_method(s, a, "strip", StripSide::kBoth); }},
      {"lstrip", [](const Value& s, const Arguments& a) { return strip_method(s, a, "lstrip", StripSide::kLeft); }},
      {"rstrip", [](const Value& s, const Arguments& a) { return strip_method(s, a, "rstrip", StripSide::kRight); }},
      {"split", split_method},
      {"replace", replace_method},
      {"join", join_method},
      {"upper", [](const Value& s, const Arguments& a) { return case_method(s, a, "upper", python_upper); }},
      {"lower", [](const Value& s, const Arguments& a) { return case_method(s, a, "lower", python_lower); }},
      {"capitalize",
       [](const Value& s, const Arguments& a) { return case_method(s, a, "capitalize", python_capitalize); }},
  };
  return methods;
}

const std::unordered_map<std::string_view, Method>& dict_methods() {
  static const std::unordered_map<std::string_view, Method> methods = {
      {"items", dict_items}, {"keys", dict_keys}, {"values", dict_values}, {"get", dict_get}};
  return methods;
}

}  // namespace

std::optional<Value> find_method(const Value& self, const std::string& name) {
  const std::unordered_map<std::string_view, Method>* table = nullptr;
  if (self.is_string()) table = &string_methods();
  if (self.is_dict()) table = &dict_methods();
  if (table == nullptr) return std::nullopt;
  const auto found = table->find(name);
  if (found == table->end()) return std::nullopt;
  const Method method = found->second;
  return Value::function([self, method](const Arguments& args) { return method(self, args); });
}

}  // namespace jet::jinja
