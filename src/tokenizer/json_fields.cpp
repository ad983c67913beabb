// Field readers for the tokenizer's JSON files.
#include "tokenizer/json_fields.h"

#include <cstdint>
#include <limits>

#include "core/error.h"

namespace jet::json_fields {

const Json& require(const Json& object, std::string_view key, std::string_view where) {
  JET_CHECK(object.is_object(), where, " must be a JSON object, got ", object.type_name());
  auto it = object.find(key);
  JET_CHECK(it != object.end(), where, ".", key, " is missing");
  return *it;
}

std::string require_string(const Json& object, std::string_view key, std::string_view where) {
  const Json& value = require(object, key, where);
  JET_CHECK(value.is_string(), where, ".", key, " must be a string, got ", value.type_name());
  return value.get<std::string>();
}

bool optional_bool(const Json& object, std::string_view key, bool fallback, std::string_view where) {
  JET_CHECK(object.is_object(), where, " must be a JSON object, got ", object.type_name());
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  JET_CHECK(it->is_boolean(), where, ".", key, " must be true or false, got ", it->dump());
  return it->get<bool>();
}

std::string component_type(const Json& component, std::string_view where) {
  return require_string(component, "type", where);
}

int32_t to_token_id(const Json& value, std::string_view where) {
  JET_CHECK(value.is_number_integer(), where, " must be an integer token id, got ", value.dump());
  const int64_t id = value.get<int64_t>();
  JET_CHECK(id >= 0 && id <= std::numeric_limits<int32_t>::max(), where, " = ", id,
            " is not a valid token id (0 .. 2^31-1)");
  return static_cast<int32_t>(id);
}

}  // namespace jet::json_fields
