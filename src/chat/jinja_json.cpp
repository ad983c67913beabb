// JSON conversion for the interpreter (see jinja_json.h).
#include "chat/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "chat/jinja_strings.h"

namespace jet::jinja {
namespace {

void append_unicode_escape(std::string& out, unsigned unit) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "\\u%04x", unit);
  out += buffer;
}

// A JSON string literal as Python's json module writes it.
void append_json_string(std::string& out, const std::string& text, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t c : decode_utf8(text)) {
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
      if (c >= 0x10000) {
        const char32_t offset = c - 0x10000;
        append_unicode_escape(out, 0xD800 + (offset >> 10));
        append_unicode_escape(out, 0xDC00 + (offset & 0x3FF));
      } else {
        append_unicode_escape(out, c);
      }
    } else {
      out += encode_utf8(std::u32string(1, c));
    }
  }
  out.push_back('"');
}

std::string json_float(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return python_float_repr(value);
}

// Deeper JSON is rejected rather than risking the stack in the recursive conversions (both ways).
constexpr int kMaxJsonDepth = 256;

class JsonWriter {
 public:
  explicit JsonWriter(const JsonFormat& format)
      : format_(format),
        item_separator_(format.item_separator.value_or(format.indent ? "," : ", ")),
        key_separator_(format.key_separator.value_or(": ")) {}

  void write(const Value& value, int depth) {
    if (depth > kMaxJsonDepth) throw EvalError(str("tojson: a value nested deeper than ", kMaxJsonDepth, " levels"));
    switch (value.kind()) {
      case Value::Kind::kNone:
        out_ += "null";
        return;
      case Value::Kind::kBool:
        out_ += value.as_bool() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        out_ += std::to_string(value.as_int());
        return;
      case Value::Kind::kFloat:
        out_ += json_float(value.as_double());
        return;
      case Value::Kind::kString:
        append_json_string(out_, value.as_string(), format_.ensure_ascii);
        return;
      case Value::Kind::kList:
        write_list(value.as_list(), depth);
        return;
      case Value::Kind::kDict:
        write_dict(value.as_dict(), depth);
        return;
      default:
        throw EvalError("tojson: object of type " + value.type_name() + " is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  void write_list(const List& items, int depth) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += "[";
    for (size_t i = 0; i < items.size(); ++i) {
      begin_item(i, depth + 1);
      write(items[i], depth + 1);
    }
    end_container(depth);
    out_ += "]";
  }

  void write_dict(const Dict& dict, int depth) {
    if (dict.size() == 0) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& entry : dict.entries()) entries.push_back(&entry);
    if (format_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
    }
    out_ += "{";
    for (size_t i = 0; i < entries.size(); ++i) {
      begin_item(i, depth + 1);
      append_json_string(out_, entries[i]->first, format_.ensure_ascii);
      out_ += key_separator_;
      write(entries[i]->second, depth + 1);
    }
    end_container(depth);
    out_ += "}";
  }

  void begin_item(size_t index, int depth) {
    if (index > 0) out_ += item_separator_;
    newline_and_indent(depth);
  }

  void end_container(int depth) { newline_and_indent(depth); }

  void newline_and_indent(int depth) {
    if (!format_.indent) return;
    out_ += "\n";
    for (int i = 0; i < depth; ++i) out_ += *format_.indent;
  }

  const JsonFormat& format_;
  const std::string item_separator_;
  const std::string key_separator_;
  std::string out_;
};

Value convert(const nlohmann::ordered_json& json, int depth) {
  using Type = nlohmann::ordered_json::value_t;
  if (depth > kMaxJsonDepth) {
    throw Error(str("chat template context: JSON nested deeper than ", kMaxJsonDepth, " levels"));
  }
  switch (json.type()) {
    case Type::null:
      return Value::none();
    case Type::boolean:
      return Value::boolean(json.get<bool>());
    case Type::number_integer:
      return Value::integer(json.get<int64_t>());
    case Type::number_unsigned: {
      const uint64_t value = json.get<uint64_t>();
      if (value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value::integer(static_cast<int64_t>(value));
      }
      return Value::number(static_cast<double>(value));
    }
    case Type::number_float:
      return Value::number(json.get<double>());
    case Type::string:
      return Value::string(json.get<std::string>());
    case Type::array: {
      List items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(convert(item, depth + 1));
      return Value::list(std::move(items));
    }
    case Type::object: {
      Dict dict;
      for (const auto& [key, item] : json.items()) dict.set(key, convert(item, depth + 1));
      return Value::dict(std::move(dict));
    }
    default:
      throw Error("chat template context: unsupported JSON value (binary or discarded)");
  }
}

}  // namespace

Value value_from_json(const nlohmann::ordered_json& json) { return convert(json, 0); }

std::string to_json_text(const Value& value, const JsonFormat& format) {
  JsonWriter writer(format);
  writer.write(value, 0);
  return writer.take();
}

}  // namespace jet::jinja
