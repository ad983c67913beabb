// Shared by the chat-template tests: render a template string with JSON variables, or get the
// error message it fails with.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "core/error.h"
#include "chat/chat_template.h"
#include "chat/jinja_template.h"

namespace jet::jinja::testing {

inline std::string render(std::string_view source, const std::string& variables_json = "{}",
                          const LexerOptions& options = {}) {
  return Template(source, options).render(variables_from_json(variables_json, "test variables"));
}

// The message of the jet::Error that parsing or rendering raises; "" (and a test failure) if none.
inline std::string error_of(std::string_view source, const std::string& variables_json = "{}") {
  try {
    const std::string output = render(source, variables_json);
    ADD_FAILURE() << "expected an error from " << source << ", got output: " << output;
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace jet::jinja::testing
