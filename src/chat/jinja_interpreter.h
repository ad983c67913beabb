// Renders a parsed template. Scoping follows Jinja: every for-loop iteration and every macro call
// gets a fresh scope (so `{% set %}` inside a loop does not leak out; namespace() objects carry
// state instead), while if blocks share the enclosing scope.
#pragma once

#include <string>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace jet::jinja {

// `context` holds the template variables; they shadow the builtin globals (range, namespace, ...).
// Throws jet::Error naming line and column for runtime errors, and TemplateRaisedError (a
// jet::Error carrying only the template's message) for raise_exception().
std::string render_template(const ast::Body& body, const Dict& context);

}  // namespace jet::jinja
