// Errors: jet::Error for bad input (a clear message naming the bad thing), JET_CHECK to raise it,
// and JET_ASSERT for internal invariants (always on; aborts with file and line).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace jet {

// Thrown for every user-facing failure: bad files, bad arguments, resources exhausted.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Concatenates anything streamable into a string: str("tensor ", name, " has ", n, " dims").
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const std::string& note);

}  // namespace jet

#define JET_CHECK(cond, ...)                                  \
  do {                                                        \
    if (!(cond)) throw ::jet::Error(::jet::str(__VA_ARGS__)); \
  } while (0)

#define JET_ASSERT(cond, ...)                                                               \
  do {                                                                                      \
    if (!(cond)) ::jet::assert_fail(#cond, __FILE__, __LINE__, ::jet::str("" __VA_ARGS__)); \
  } while (0)
