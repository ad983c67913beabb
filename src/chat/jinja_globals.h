// The global functions a chat template can call: Jinja's range, namespace and dict, and the two
// transformers adds, raise_exception(message) and strftime_now(format).
#pragma once

#include "chat/jinja_value.h"

namespace jet::jinja {

// Thrown by raise_exception(message); what() is the template's message, unchanged.
class TemplateRaisedError : public Error {
 public:
  using Error::Error;
};

Dict builtin_globals();

}  // namespace jet::jinja
