// The CUDA backend's entry points for code that must not include CUDA headers (registry.cpp).
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"

namespace jet {

int cuda_device_count();  // visible CUDA devices; 0 without a driver
inline bool cuda_device_available() { return cuda_device_count() > 0; }
std::unique_ptr<Backend> make_cuda_backend(int device = 0);  // an index below cuda_device_count()
// The communicators of tensor-parallel ranks on these CUDA backends (one GPU each), over NCCL
// (nccl_communicator.cu); throws when the build has no NCCL.
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<Backend*>& ranks);

}  // namespace jet
