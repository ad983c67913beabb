// The interpreter's value type (see jinja_value.h): construction, truthiness and Python str/repr.
#include "chat/jinja_value.h"

#include "chat/jinja_strings.h"

namespace jet::jinja {
namespace {

template <typename Items, typename Format>
std::string join_repr(const Items& items, Format format) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += format(item);
  }
  return out;
}

// Printing recurses into lists, dicts and namespaces; a value nested this deep (or holding itself,
// as a namespace can) is an error rather than a stack overflow.
constexpr int kMaxReprDepth = 256;
thread_local int repr_depth = 0;

struct ReprDepthGuard {
  ReprDepthGuard() {
    if (++repr_depth > kMaxReprDepth) {
      --repr_depth;
      throw EvalError(
          str("a value nested deeper than ", kMaxReprDepth, " levels (or holding itself) cannot be printed"));
    }
  }
  ~ReprDepthGuard() { --repr_depth; }
};

std::string dict_repr(const Dict& dict) {
  return "{" +
         join_repr(dict.entries(),
                   [](const auto& entry) { return python_string_repr(entry.first) + ": " + to_repr(entry.second); }) +
         "}";
}

}  // namespace

const Value* Dict::find(std::string_view key) const {
  for (const auto& entry : entries_) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  for (auto& entry : entries_) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string description) {
  Value v;
  v.data_ = std::move(description);
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  v.data_ = std::monostate();
  return v;
}

Value Value::boolean(bool value) {
  Value v;
  v.kind_ = Kind::kBool;
  v.data_ = value;
  return v;
}

Value Value::integer(int64_t value) {
  Value v;
  v.kind_ = Kind::kInt;
  v.data_ = value;
  return v;
}

Value Value::number(double value) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.data_ = value;
  return v;
}

Value Value::string(std::string value) {
  Value v;
  v.kind_ = Kind::kString;
  v.data_ = std::move(value);
  return v;
}

Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::kList;
  v.data_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::dict(Dict entries) {
  Value v;
  v.kind_ = Kind::kDict;
  v.data_ = std::make_shared<const Dict>(std::move(entries));
  return v;
}

Value Value::make_namespace(Dict entries) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.data_ = std::make_shared<Dict>(std::move(entries));
  return v;
}

Value Value::function(Function function) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.data_ = std::make_shared<const Function>(std::move(function));
  return v;
}

int64_t Value::as_int() const {
  return kind_ == Kind::kBool ? static_cast<int64_t>(as_bool()) : std::get<int64_t>(data_);
}

double Value::as_double() const {
  return kind_ == Kind::kFloat ? std::get<double>(data_) : static_cast<double>(as_int());
}

const Dict& Value::as_dict() const {
  if (kind_ == Kind::kNamespace) return namespace_dict();
  return *std::get<std::shared_ptr<const Dict>>(data_);
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_double() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !as_list().empty();
    case Kind::kDict:
      return as_dict().size() != 0;
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kFunction:
      return "function";
  }
  return "unknown";
}

void Value::fail_undefined() const {
  const std::string& description = undefined_description();
  throw EvalError(description.empty() ? "value is undefined" : description);
}

std::string to_display_string(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kString:
      return value.as_string();
    case Value::Kind::kNamespace:
      return "<Namespace " + dict_repr(value.as_dict()) + ">";
    default:
      return to_repr(value);
  }
}

std::string to_repr(const Value& value) {
  const ReprDepthGuard guard;
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return value.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(value.as_int());
    case Value::Kind::kFloat:
      return python_float_repr(value.as_double());
    case Value::Kind::kString:
      return python_string_repr(value.as_string());
    case Value::Kind::kList:
      return "[" + join_repr(value.as_list(), to_repr) + "]";
    case Value::Kind::kDict:
      return dict_repr(value.as_dict());
    case Value::Kind::kNamespace:
      return to_display_string(value);
    case Value::Kind::kFunction:
      return "<function>";
  }
  return "";
}

}  // namespace jet::jinja
