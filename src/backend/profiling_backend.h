// ProfilingBackend: wraps another backend and accumulates the wall time of each op (the inner
// backend is synchronised after every op so the times are the op's own). For benchmarks.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace jet {

using OpProfile = std::map<std::string, double>;  // op name -> seconds

std::unique_ptr<Backend> make_profiling_backend(std::unique_ptr<Backend> inner, std::shared_ptr<OpProfile> profile);

}  // namespace jet
