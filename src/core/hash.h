// mix64, the SplitMix64 finaliser: the 64-bit mixing step of the counter-based RNG
// (sampling/rng.h) and of the prefix cache's page hashes (engine/block_manager.cpp).
// Header-only and host+device, so the CUDA kernels draw the same numbers.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace jet {

JET_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace jet
