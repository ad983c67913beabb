// Counter-based RNG of docs/decoding.md §6: every draw is a pure function of
// (seed, position, step, lane), so a seeded request's samples do not depend on batching or
// preemption. Header-only and marked host+device so the CUDA backend draws the same numbers.
#pragma once

#include <cstdint>

#include "core/hash.h"
#include "core/host_device.h"

namespace jet {

// Lane of the `random` remasking strategy's draw: above every token id, so it never collides
// with a Gumbel lane (lane = token id) of the same (position, step).
constexpr uint64_t kRandomStrategyLane = uint64_t{1} << 32;
// Lane of epsilon-greedy's draw, one per block and step (at the block's first position): whether
// the step uses `random` instead of the request's strategy.
constexpr uint64_t kEpsilonGreedyLane = kRandomStrategyLane + 1;

// The hash of (seed, position, step): shared by every lane of one position's draws, so a caller
// drawing many lanes (one per token id for Gumbel-max) hashes it once.
JET_HOST_DEVICE inline uint64_t uniform_prefix(uint64_t seed, uint64_t position, uint64_t step) {
  uint64_t h = mix64(seed ^ 0x9E3779B97F4A7C15ull);
  h = mix64(h + position);
  return mix64(h + step);
}

// The draw of one lane given its prefix, strictly inside (0, 1): (h >> 12) + 0.5 is exact in a double.
JET_HOST_DEVICE inline double uniform_lane(uint64_t prefix, uint64_t lane) {
  const uint64_t h = mix64(prefix + lane);
  return (static_cast<double>(h >> 12) + 0.5) * 0x1.0p-52;
}

JET_HOST_DEVICE inline double uniform(uint64_t seed, uint64_t position, uint64_t step, uint64_t lane) {
  return uniform_lane(uniform_prefix(seed, position, step), lane);
}

}  // namespace jet
