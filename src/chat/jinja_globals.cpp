// Global functions of the template environment (see jinja_globals.h).
#include "chat/jinja_globals.h"

#include <ctime>

#include "chat/jinja_arguments.h"

namespace jet::jinja {
namespace {

// Jinja's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Value range(const Arguments& args) {
  if (!args.keywords.empty()) throw EvalError("range() takes no keyword arguments");
  const size_t count = args.positional.size();
  if (count < 1 || count > 3) throw EvalError(str("range expected 1 to 3 arguments, got ", count));
  for (const Value& arg : args.positional) {
    if (!arg.is_integral()) throw EvalError("range(): arguments must be integers, not " + arg.type_name());
  }
  const int64_t start = count == 1 ? 0 : args.positional[0].as_int();
  const int64_t stop = count == 1 ? args.positional[0].as_int() : args.positional[1].as_int();
  const int64_t step = count == 3 ? args.positional[2].as_int() : 1;
  if (step == 0) throw EvalError("range() arg 3 must not be zero");
  List items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) == kMaxRange) {
      throw EvalError(str("range too big, the sandbox allows at most ", kMaxRange, " items"));
    }
    items.push_back(Value::integer(i));
  }
  return Value::list(std::move(items));
}

// namespace(...) and dict(...) both take optional dicts followed by keyword arguments.
Dict merge_dict_arguments(const char* callee, const Arguments& args) {
  Dict entries;
  for (const Value& arg : args.positional) {
    if (!arg.is_dict()) throw EvalError(str(callee, "(): positional arguments must be dicts, not ", arg.type_name()));
    for (const auto& [key, value] : arg.as_dict().entries()) entries.set(key, value);
  }
  for (const auto& [key, value] : args.keywords) entries.set(key, value);
  return entries;
}

Value raise_exception(const Arguments& args) {
  const BoundArguments bound("raise_exception", args, {"message"}, 1);
  throw TemplateRaisedError(to_display_string(bound[0]));
}

Value strftime_now(const Arguments& args) {
  const BoundArguments bound("strftime_now", args, {"format"}, 1);
  const std::string& format = bound.string_at(0);
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  // strftime returns 0 both for "buffer too small" and for an empty result; grow a few times.
  for (size_t size = 64 + format.size() * 4; size <= 65536; size *= 4) {
    std::string buffer(size, '\0');
    const size_t written = std::strftime(buffer.data(), buffer.size(), format.c_str(), &local);
    if (written > 0 || format.empty()) return Value::string(buffer.substr(0, written));
  }
  return Value::string("");
}

}  // namespace

Dict builtin_globals() {
  Dict globals;
  globals.set("range", Value::function(range));
  globals.set("namespace", Value::function([](const Arguments& args) {
                return Value::make_namespace(merge_dict_arguments("namespace", args));
              }));
  globals.set("dict",
              Value::function([](const Arguments& args) { return Value::dict(merge_dict_arguments("dict", args)); }));
  globals.set("raise_exception", Value::function(raise_exception));
  globals.set("strftime_now", Value::function(strftime_now));
  return globals;
}

}  // namespace jet::jinja
