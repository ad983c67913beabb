// Typed reads of the keys of a JSON object, for a checkpoint's JSON files (config.json, the shard
// index, ...) and the server's request bodies: every error names the source (a file, "the request
// body"), the key, the expected and the actual JSON type. (tokenizer/json_fields.h reads the nested
// components of tokenizer.json, naming each by its path instead.)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace jet {

using Json = nlohmann::json;

// "integer", "number", "string", "boolean", "null", "array" or "object".
std::string_view json_type_name(const Json& value);

// `value` as compact JSON text, cut to `max_chars` (for quoting a bad value in an error).
std::string json_excerpt(const Json& value, size_t max_chars = 60);

// Nesting beyond this many arrays / objects is refused (no config or request needs more).
constexpr int kMaxJsonDepth = 64;

// Parses `text`; a syntax error or nesting past kMaxJsonDepth becomes a jet::Error naming `source`.
Json parse_json(std::string_view text, const std::string& source);

// A JSON object and where it came from (a file's path, "the request body"). A key holding null
// counts as absent, as it does for HuggingFace configs ("n_kv_heads": null means "use the default")
// and OpenAI requests.
class JsonObject {
 public:
  JsonObject(Json object, std::string source);  // throws unless `object` is a JSON object
  static JsonObject from_file(const std::string& path);

  const std::string& source() const { return source_; }
  const Json& json() const { return json_; }
  bool has(const std::string& key) const;

  // Required keys: absent -> "missing key"; wrong type -> "must be <type>, got <type>".
  int64_t get_int(const std::string& key) const;
  double get_number(const std::string& key) const;
  std::string get_string(const std::string& key) const;

  // Optional keys: `fallback` when absent; a present value of the wrong type is still an error.
  int64_t get_int(const std::string& key, int64_t fallback) const;
  int get_int32(const std::string& key, int fallback) const;  // an integer an int holds
  double get_number(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, std::string fallback) const;
  std::vector<int64_t> get_int_list(const std::string& key, std::vector<int64_t> fallback) const;
  // An integer or a list of integers (HF writes eos_token_id either way).
  std::vector<int64_t> get_int_or_int_list(const std::string& key, std::vector<int64_t> fallback) const;

  // Throws "<source>: key '<key>' must be <expected>, got <type> <value>", for a caller's own checks.
  [[noreturn]] void wrong_type(const std::string& key, std::string_view expected) const;

 private:
  const Json& require(const std::string& key) const;
  int64_t to_int(const std::string& key, const Json& value) const;

  Json json_;
  std::string source_;
};

}  // namespace jet
