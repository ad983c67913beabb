// Python-style argument binding for builtins (see jinja_arguments.h).
#include "chat/jinja_arguments.h"

#include <algorithm>

namespace jet::jinja {

BoundArguments::BoundArguments(std::string_view callee, const Arguments& args,
                               std::initializer_list<std::string_view> params, size_t required)
    : callee_(callee), names_(params), values_(params.size()), given_(params.size(), false) {
  if (args.positional.size() > names_.size()) {
    throw EvalError(
        str(callee_, "() takes at most ", names_.size(), " argument(s), ", args.positional.size(), " given"));
  }
  for (size_t i = 0; i < args.positional.size(); ++i) {
    values_[i] = args.positional[i];
    given_[i] = true;
  }
  for (const auto& [key, value] : args.keywords) {
    const auto found = std::find(names_.begin(), names_.end(), key);
    if (found == names_.end()) throw EvalError(str(callee_, "() got an unexpected keyword argument '", key, "'"));
    const size_t index = static_cast<size_t>(found - names_.begin());
    if (given_[index]) throw EvalError(str(callee_, "() got multiple values for argument '", key, "'"));
    values_[index] = value;
    given_[index] = true;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!given_[i]) throw EvalError(str(callee_, "() missing required argument '", names_[i], "'"));
  }
}

const std::string& BoundArguments::string_at(size_t index) const {
  if (!values_[index].is_string()) fail_type(index, "a string");
  return values_[index].as_string();
}

int64_t BoundArguments::integer_at(size_t index) const {
  if (!values_[index].is_integral()) fail_type(index, "an integer");
  return values_[index].as_int();
}

void BoundArguments::fail_type(size_t index, std::string_view expected) const {
  throw EvalError(
      str(callee_, "(): argument '", names_[index], "' must be ", expected, ", not ", values_[index].type_name()));
}

}  // namespace jet::jinja
