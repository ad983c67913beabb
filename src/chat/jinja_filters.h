// Jinja filters (`x | name(args)`) and tests (`x is name(args)`) available to chat templates, with
// Jinja2's semantics; `tojson` is transformers' override (json.dumps, non-ASCII kept as is).
#pragma once

#include <string_view>

#include "chat/jinja_value.h"

namespace jet::jinja {

// Filters: abs, capitalize, count, default (d), first, float, int, items, join, last, length, list,
// lower, map, reject, rejectattr, replace, reverse, select, selectattr, string, tojson, trim, upper.
bool has_filter(std::string_view name);
Value apply_filter(std::string_view name, const Value& subject, const Arguments& args);

// Tests: boolean, callable, defined, divisibleby, eq/equalto/==, even, false, float, ge/>=, gt/>,
// greaterthan, in, integer, iterable, le/<=, lessthan, lt/<, mapping, ne/!=, none, number, odd,
// sequence, string, true, undefined.
bool has_test(std::string_view name);
bool apply_test(std::string_view name, const Value& subject, const Arguments& args);

}  // namespace jet::jinja
