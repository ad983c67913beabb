// The value type of the chat-template interpreter: Jinja's Undefined plus the Python values a
// template sees (None, bool, int, float, str, list, dict), namespaces and callables.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"

namespace jet::jinja {

// A failure while evaluating a template expression (type mismatch, undefined operand, bad
// argument). The interpreter adds the template line and column before it reaches the caller.
class EvalError : public Error {
 public:
  using Error::Error;
};

class Value;
using List = std::vector<Value>;

class Dict;
struct Arguments;
using Function = std::function<Value(const Arguments&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction };

  Value() = default;  // Undefined with no name
  // `description` says what was looked up, for the error raised when the value is used:
  // e.g. "'foo' is undefined" or "'dict object' has no attribute 'bar'".
  static Value undefined(std::string description);
  static Value none();
  static Value boolean(bool value);
  static Value integer(int64_t value);
  static Value number(double value);
  static Value string(std::string value);
  static Value list(List items);
  static Value dict(Dict entries);
  // A namespace() object: a dict whose attributes `{% set ns.x = ... %}` can change; copies share it.
  static Value make_namespace(Dict entries);
  static Value function(Function function);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  // bool counts as a number, as in Python (True + 1 == 2).
  bool is_number() const { return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_integral() const { return kind_ == Kind::kBool || kind_ == Kind::kInt; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;    // bool or int
  double as_double() const;  // any number
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(data_); }
  const Dict& as_dict() const;  // dict or namespace
  Dict& namespace_dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(data_); }
  const std::string& undefined_description() const { return std::get<std::string>(data_); }

  // Python truthiness; Undefined is false.
  bool truthy() const;
  // The name Jinja uses in messages: "str object", "list object", "dict object", ...
  std::string type_name() const;
  // Throws EvalError naming the undefined thing; used where Jinja's Undefined raises.
  [[noreturn]] void fail_undefined() const;

 private:
  Kind kind_ = Kind::kUndefined;
  // Undefined keeps its description in the string slot; None uses the monostate.
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<const List>,
               std::shared_ptr<const Dict>, std::shared_ptr<Dict>, std::shared_ptr<const Function>>
      data_{std::in_place_type<std::string>};
};
// A string-keyed dict that keeps insertion order, like a Python dict (tojson and items() depend
// on the order). Lookup is linear: template dicts are small.
class Dict {
 public:
  Dict() = default;
  // From entries with distinct keys (not checked), skipping set()'s lookup for each.
  explicit Dict(std::vector<std::pair<std::string, Value>> entries) : entries_(std::move(entries)) {}

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces an existing key in place
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

// Arguments of a call, a filter or a test (without the subject).
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

// str(value) in Python, which is what `{{ value }}`, `~` and the `string` filter produce.
// Undefined gives "" (Jinja's default Undefined prints as nothing).
std::string to_display_string(const Value& value);
// repr(value) in Python (how items inside a printed list or dict appear).
std::string to_repr(const Value& value);

}  // namespace jet::jinja
