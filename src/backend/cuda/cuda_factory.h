// The CUDA backend's entry points for code that must not include CUDA headers (registry.cpp).
#pragma once

#include <memory>

#include "backend/backend.h"

namespace jet {

int cuda_device_count();  // visible CUDA devices; 0 without a driver
inline bool cuda_device_available() { return cuda_device_count() > 0; }
std::unique_ptr<Backend> make_cuda_backend(int device = 0);  // an index below cuda_device_count()

}  // namespace jet
