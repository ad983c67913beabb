// Internal-invariant failure: print where and abort (never silently continue with corrupt state).
#include "core/error.h"

#include <cstdio>
#include <cstdlib>

namespace jet {

void assert_fail(const char* expr, const char* file, int line, const std::string& note) {
  std::fprintf(stderr, "jetengine: internal error: %s failed at %s:%d %s\n", expr, file, line, note.c_str());
  std::abort();
}

}  // namespace jet
