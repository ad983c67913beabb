// Helpers of the tests that drive the Scheduler and BlockManager without a model: token runs,
// sequences of a prompt length, scheduler limits.
#pragma once

#include <numeric>
#include <vector>

#include "engine/scheduler.h"

namespace jet::test {

// n consecutive ids from `first`.
inline std::vector<int32_t> iota_tokens(int n, int32_t first = 1) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// A fresh sequence whose prompt is iota_tokens(prompt_len, first).
inline Sequence sequence_of(int prompt_len, int32_t first = 1) {
  Sequence s;
  s.prompt = iota_tokens(prompt_len, first);
  return s;
}

inline SchedulerLimits limits(int block_length, int max_num_seqs = 4, bool prefix_caching = false) {
  SchedulerLimits l;
  l.max_num_seqs = max_num_seqs;
  l.block_length = block_length;
  l.prefix_caching = prefix_caching;
  return l;
}

}  // namespace jet::test
