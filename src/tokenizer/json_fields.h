// Reading tokenizer.json / tokenizer_config.json fields with errors that name the field path
// ("model.merges[12]: ..."), so a bad file says exactly what is wrong.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace jet::json_fields {

using Json = nlohmann::json;

// object[key]; throws if `object` is not an object or has no such key.
const Json& require(const Json& object, std::string_view key, std::string_view where);

// object[key] as a string (throws naming `where.key` if missing or not a string).
std::string require_string(const Json& object, std::string_view key, std::string_view where);

// object[key] as a bool, or `fallback` when the key is absent or null.
bool optional_bool(const Json& object, std::string_view key, bool fallback, std::string_view where);

// The "type" string of a component object such as the normalizer.
std::string component_type(const Json& component, std::string_view where);

// A token id: an integer in [0, INT32_MAX].
int32_t to_token_id(const Json& value, std::string_view where);

}  // namespace jet::json_fields
