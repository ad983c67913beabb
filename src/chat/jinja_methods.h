// The Python methods of str and dict that chat templates call, e.g.
// message.content.startswith('<tool_response>'), content.split('</think>'), tool.items().
#pragma once

#include <optional>
#include <string>

#include "chat/jinja_value.h"

namespace jet::jinja {

// The method `name` of `self` bound to it as a callable value, or nullopt when `self`'s type has no
// such method here. str: startswith, endswith, strip, lstrip, rstrip, split, replace, upper, lower,
// capitalize, join. dict: items, keys, values, get.
std::optional<Value> find_method(const Value& self, const std::string& name);

}  // namespace jet::jinja
