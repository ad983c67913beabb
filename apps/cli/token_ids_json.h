// Token ids read from JSON (a prompt file's line, detokenize's input): an array of integers, each
// one a 32-bit id, or an error naming the element.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/json_object.h"

namespace jet::cli {

inline std::vector<int32_t> ids_from_json(const nlohmann::json& value) {
  JET_CHECK(value.is_array(), "expected a JSON array of token ids, got ", value.type_name());
  std::vector<int32_t> ids;
  ids.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const nlohmann::json& id = value[i];
    // Unsigned values above INT64_MAX would wrap in an int64 read, so they are compared unsigned.
    const bool fits = id.is_number_unsigned()  ? id.get<uint64_t>() <= INT32_MAX
                      : id.is_number_integer() ? id.get<int64_t>() >= INT32_MIN && id.get<int64_t>() <= INT32_MAX
                                               : false;
    JET_CHECK(fits, "element ", i, " of the id array is ", json_excerpt(id), ", not a 32-bit integer");
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

}  // namespace jet::cli
