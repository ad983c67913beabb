// Binds the arguments of a builtin call (filter, test, method, global function) to its named
// parameters the way Python does, so builtins read `args[1]` instead of parsing by hand.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_value.h"

namespace jet::jinja {

class BoundArguments {
 public:
  // Throws EvalError for too many positional arguments, unknown or repeated keywords, and missing
  // required ones (the first `required` parameters).
  BoundArguments(std::string_view callee, const Arguments& args, std::initializer_list<std::string_view> params,
                 size_t required = 0);

  bool has(size_t index) const { return given_[index]; }
  // The argument, or Undefined when it was not passed.
  const Value& operator[](size_t index) const { return values_[index]; }

  // Typed readers that fail with a message naming the callee and the parameter.
  const std::string& string_at(size_t index) const;
  int64_t integer_at(size_t index) const;

 private:
  [[noreturn]] void fail_type(size_t index, std::string_view expected) const;

  std::string callee_;
  std::vector<std::string_view> names_;
  std::vector<Value> values_;
  std::vector<bool> given_;
};

}  // namespace jet::jinja
