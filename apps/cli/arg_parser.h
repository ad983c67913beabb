// A small flag parser for the CLI verbs: --name VALUE, --name=VALUE and boolean --flag.
// Unknown flags and missing values are errors that name the flag.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"

namespace jet::cli {

class ArgParser {
 public:
  // `value_flags` take a value, `bool_flags` do not. Names include the leading "--".
  ArgParser(const std::vector<std::string>& args, std::set<std::string> value_flags, std::set<std::string> bool_flags) {
    for (size_t i = 0; i < args.size(); ++i) {
      std::string name = args[i];
      std::optional<std::string> value;
      if (auto eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (bool_flags.count(name)) {
        JET_CHECK(!value, "flag ", name, " takes no value");
        flags_.insert(name);
      } else if (value_flags.count(name)) {
        if (!value) {
          JET_CHECK(i + 1 < args.size(), "flag ", name, " needs a value");
          value = args[++i];
        }
        values_[name] = *value;
      } else {
        throw Error(str("unknown argument '", args[i], "' (see --help)"));
      }
    }
  }

  bool has(const std::string& name) const { return flags_.count(name) || values_.count(name); }
  std::optional<std::string> get(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  std::string require(const std::string& name) const {
    auto v = get(name);
    JET_CHECK(v, "missing required flag ", name);
    return *v;
  }
  double get_double(const std::string& name, double fallback) const {
    auto v = get(name);
    if (!v) return fallback;
    try {
      size_t used = 0;
      double d = std::stod(*v, &used);
      JET_CHECK(used == v->size(), "");
      return d;
    } catch (...) {
      throw Error(str("flag ", name, " expects a number, got '", *v, "'"));
    }
  }
  long long get_int(const std::string& name, long long fallback) const {
    auto v = get(name);
    if (!v) return fallback;
    try {
      size_t used = 0;
      long long n = std::stoll(*v, &used);
      JET_CHECK(used == v->size(), "");
      return n;
    } catch (...) {
      throw Error(str("flag ", name, " expects an integer, got '", *v, "'"));
    }
  }
  // Comma-separated integers ("1,16,128"), each whole item an integer; `fallback` when absent.
  std::vector<long long> get_int_list(const std::string& name, const std::string& fallback) const {
    const std::string text = get(name).value_or(fallback);
    std::vector<long long> out;
    size_t start = 0;
    for (;;) {
      const size_t comma = text.find(',', start);
      const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      try {
        size_t used = 0;
        out.push_back(std::stoll(item, &used));
        JET_CHECK(used == item.size(), "");
      } catch (...) {
        throw Error(str("flag ", name, " expects comma-separated integers, got '", text, "'"));
      }
      if (comma == std::string::npos) return out;
      start = comma + 1;
    }
  }
  // An integer an int holds (the options' and sampling fields' type).
  int get_int32(const std::string& name, int fallback) const {
    const long long n = get_int(name, fallback);
    JET_CHECK(n >= INT32_MIN && n <= INT32_MAX, "flag ", name, " expects an integer in [-2^31, 2^31), got ", n);
    return static_cast<int>(n);
  }

 private:
  std::set<std::string> flags_;
  std::map<std::string, std::string> values_;
};

}  // namespace jet::cli
