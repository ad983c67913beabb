// Template: parse once, render many times (see jinja_template.h).
#include "chat/jinja_template.h"

#include "chat/jinja_interpreter.h"
#include "chat/jinja_parser.h"

namespace jet::jinja {

Template::Template(std::string_view source, const LexerOptions& options) : body_(parse(tokenize(source, options))) {}

std::string Template::render(const Dict& context) const { return render_template(body_, context); }

}  // namespace jet::jinja
