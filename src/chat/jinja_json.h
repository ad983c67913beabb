// JSON in and out of the interpreter: template variables from JSON (key order kept), and the
// `tojson` filter, which formats exactly like Python's json.dumps (what transformers installs).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/jinja_value.h"

namespace jet::jinja {

Value value_from_json(const nlohmann::ordered_json& json);

// The options of json.dumps that transformers' `tojson` exposes. Defaults match
// tojson(x) == json.dumps(x, ensure_ascii=False).
struct JsonFormat {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // None: one line; "" (indent=0) still breaks lines
  std::optional<std::string> item_separator;  // None: ", " on one line, "," when indented
  std::optional<std::string> key_separator;   // None: ": "
  bool sort_keys = false;
};

// Throws EvalError for values JSON cannot hold (Undefined, namespaces, functions).
std::string to_json_text(const Value& value, const JsonFormat& format);

}  // namespace jet::jinja
