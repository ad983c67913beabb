// The CPU backend: the reference implementation of every backend op (fp32, OpenBLAS + OpenMP).
#pragma once

#include <memory>

#include "backend/backend.h"

namespace jet {

// num_threads <= 0 uses every core.
std::unique_ptr<Backend> make_cpu_backend(int num_threads);

}  // namespace jet
