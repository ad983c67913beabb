// The CUDA backend's entry points for code that must not include CUDA headers (registry.cpp).
#pragma once

#include <memory>

#include "backend/backend.h"

namespace jet {

bool cuda_device_available();
std::unique_ptr<Backend> make_cuda_backend();  // device 0 (CUDA_VISIBLE_DEVICES selects)

}  // namespace jet
