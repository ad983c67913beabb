// JsonObject: typed, error-naming access to the keys of a JSON object (checkpoint files, request bodies).
#include "core/json_object.h"

#include <cstdint>
#include <limits>

#include "core/error.h"
#include "core/mapped_file.h"

namespace jet {

std::string_view json_type_name(const Json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  if (value.is_string()) return "string";
  if (value.is_boolean()) return "boolean";
  if (value.is_null()) return "null";
  if (value.is_array()) return "array";
  if (value.is_object()) return "object";
  return "binary";
}

namespace {

// Appends value's compact JSON to out, stopping once out holds more than `limit` characters. Each
// level of nesting writes a bracket first, so the descent is bounded by the limit too: a request
// body nested 100,000 deep cannot exhaust the stack, as a full dump would.
void append_excerpt(const Json& value, size_t limit, std::string& out) {
  if (!value.is_structured()) {
    out += value.dump(-1, ' ', false, Json::error_handler_t::replace);
    return;
  }
  out += value.is_array() ? '[' : '{';
  bool first = true;
  for (auto it = value.begin(); it != value.end() && out.size() <= limit; ++it, first = false) {
    if (!first) out += ',';
    if (value.is_object()) out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace) + ":";
    append_excerpt(it.value(), limit, out);
  }
  out += value.is_array() ? ']' : '}';
}

}  // namespace

std::string json_excerpt(const Json& value, size_t max_chars) {
  std::string text;
  append_excerpt(value, max_chars, text);
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

Json parse_json(std::string_view text, const std::string& source) {
  // Refused while parsing, before a deep value exists: copying or destroying one recurses once a
  // level, so a body of a few hundred KB of brackets would overflow the stack.
  const Json::parser_callback_t depth_guard = [&](int depth, Json::parse_event_t, Json&) {
    JET_CHECK(depth <= kMaxJsonDepth, source, ": JSON nested deeper than ", kMaxJsonDepth, " levels");
    return true;
  };
  try {
    return Json::parse(text, depth_guard);
  } catch (const Json::exception& e) {  // syntax, and numbers past double's range (1e400)
    throw Error(str(source, ": not valid JSON (", e.what(), ")"));
  }
}

JsonObject::JsonObject(Json object, std::string source) : json_(std::move(object)), source_(std::move(source)) {
  JET_CHECK(json_.is_object(), source_, ": expected a JSON object, got ", json_type_name(json_));
}

JsonObject JsonObject::from_file(const std::string& path) {
  return JsonObject(parse_json(read_text_file(path), path), path);
}

bool JsonObject::has(const std::string& key) const {
  auto it = json_.find(key);
  return it != json_.end() && !it->is_null();
}

const Json& JsonObject::require(const std::string& key) const {
  auto it = json_.find(key);
  JET_CHECK(it != json_.end(), source_, ": missing required key '", key, "'");
  return *it;
}

void JsonObject::wrong_type(const std::string& key, std::string_view expected) const {
  throw Error(str(source_, ": key '", key, "' must be ", expected, ", got ", json_type_name(json_.at(key)), " ",
                  json_excerpt(json_.at(key))));
}

int64_t JsonObject::to_int(const std::string& key, const Json& value) const {
  if (!value.is_number_integer()) wrong_type(key, "an integer");
  if (value.is_number_unsigned()) {
    auto u = value.get<uint64_t>();
    JET_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), source_, ": key '", key,
              "' is out of range (", u, ")");
    return static_cast<int64_t>(u);
  }
  return value.get<int64_t>();
}

int64_t JsonObject::get_int(const std::string& key) const { return to_int(key, require(key)); }

double JsonObject::get_number(const std::string& key) const {
  const Json& value = require(key);
  if (!value.is_number()) wrong_type(key, "a number");
  return value.get<double>();
}

std::string JsonObject::get_string(const std::string& key) const {
  const Json& value = require(key);
  if (!value.is_string()) wrong_type(key, "a string");
  return value.get<std::string>();
}

int64_t JsonObject::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

int JsonObject::get_int32(const std::string& key, int fallback) const {
  const int64_t value = get_int(key, fallback);
  if (value < INT32_MIN || value > INT32_MAX) wrong_type(key, "an integer in [-2^31, 2^31)");
  return static_cast<int>(value);
}

double JsonObject::get_number(const std::string& key, double fallback) const {
  return has(key) ? get_number(key) : fallback;
}

bool JsonObject::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const Json& value = json_.at(key);
  if (!value.is_boolean()) wrong_type(key, "a boolean");
  return value.get<bool>();
}

std::string JsonObject::get_string(const std::string& key, std::string fallback) const {
  return has(key) ? get_string(key) : fallback;
}

std::vector<int64_t> JsonObject::get_int_list(const std::string& key, std::vector<int64_t> fallback) const {
  if (!has(key)) return fallback;
  const Json& value = json_.at(key);
  if (!value.is_array()) wrong_type(key, "a list of integers");
  std::vector<int64_t> out;
  for (const Json& item : value) {
    if (!item.is_number_integer()) wrong_type(key, "a list of integers");
    out.push_back(to_int(key, item));
  }
  return out;
}

std::vector<int64_t> JsonObject::get_int_or_int_list(const std::string& key, std::vector<int64_t> fallback) const {
  if (!has(key)) return fallback;
  if (json_.at(key).is_number_integer()) return {get_int(key)};
  if (!json_.at(key).is_array()) wrong_type(key, "an integer or a list of integers");
  return get_int_list(key, {});
}

}  // namespace jet
