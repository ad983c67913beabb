// The remasking rules (docs/decoding.md §4), shared by the CPU backend (decode.cpp, remasking.cpp)
// and the CUDA kernels (backend/cuda/decode.cu): which strategy a step applies (the exploration
// modifiers may replace the request's), then the strategies' two rules: every strategy ranks a
// block's masked positions by a key (smaller first, ties: lower block index) and commits a prefix
// of that ranking; only the key and the prefix length differ.
#pragma once

#include <cmath>

#include "sampling/sampling_types.h"
#include "core/host_device.h"
#include "sampling/rng.h"

namespace jet {

// The strategy of one step of a row's block (docs/decoding.md §4, exploration): `sequential` while
// the block starts below sequential_below (diversity_enforce), else `random` when the step's
// epsilon-greedy draw falls below epsilon_greedy, else the request's own.
JET_HOST_DEVICE inline Strategy step_strategy(const SlotParams& p, const StepRow& r) {
  if (r.position0 < p.sequential_below) return Strategy::Sequential;
  if (p.epsilon_greedy > 0.0f && uniform(p.seed, static_cast<uint64_t>(r.position0),
                                         static_cast<uint64_t>(r.global_step), kEpsilonGreedyLane) < p.epsilon_greedy) {
    return Strategy::Random;
  }
  return p.strategy;
}

// Whether block position j of row r has a logits row in the step (StepRow): a masked candidate
// inside the row's window, or, under token editing, a committed position at or past edits_begin.
JET_HOST_DEVICE inline bool has_logits_row(const StepRow& r, int j, bool masked) {
  return masked ? j >= r.candidates_begin && j < r.candidates_end : j >= r.edits_begin;
}

// Token editing (docs/decoding.md §4): a committed position takes its new sample when the sample
// is more confident than the request's editing_threshold and differs from the token it holds.
JET_HOST_DEVICE inline bool edits_token(const SlotParams& p, const PositionSample& s, int32_t token) {
  return s.confidence > p.editing_threshold && s.token != token;
}

// Index reversed in ceil(log2 B) bits: the dilated order visits indices by increasing value.
JET_HOST_DEVICE inline int bit_reversed(int index, int block_length) {
  int bits = 0;
  while ((1 << bits) < block_length) ++bits;
  int reversed = 0;
  for (int b = 0; b < bits; ++b) reversed |= ((index >> b) & 1) << (bits - 1 - b);
  return reversed;
}

// The ranking key of a masked position. `random` is the position's
// uniform(seed, position, step, kRandomStrategyLane) draw, read by the random strategy only.
// NaN scores (from NaN logits) rank last, so the ranking is always a strict total order.
JET_HOST_DEVICE inline double ranking_key(Strategy strategy, int index, float confidence, float entropy, float margin,
                                          double random, int block_length) {
  double key = 0.0;
  switch (strategy) {
    case Strategy::Sequential:
      key = index;
      break;
    case Strategy::AntiSequential:
      key = -index;
      break;
    case Strategy::Random:
      key = -random;
      break;
    case Strategy::Dilated:
      key = bit_reversed(index, block_length);
      break;
    case Strategy::MarginStatic:
      key = -static_cast<double>(margin);
      break;
    case Strategy::EntropyStatic:
    case Strategy::EntropyBounded:
      key = entropy;
      break;
    case Strategy::LowConfidenceStatic:
    case Strategy::LowConfidenceDynamic:
    case Strategy::DynamicFactor:
    case Strategy::DynamicPmax:
      key = -static_cast<double>(confidence);
      break;
  }
  return key != key ? INFINITY : key;
}

// How many of the m ranked positions to commit; confidence[r] and entropy[r] belong to the
// position of rank r, count = min(n_sched, m).
JET_HOST_DEVICE inline int prefix_length(Strategy strategy, const float* confidence, const float* entropy, int m,
                                         int count, const SlotParams& p) {
  switch (strategy) {
    case Strategy::LowConfidenceDynamic: {
      int above = 0;  // ranked by confidence, so the ones above the threshold lead
      while (above<m&& static_cast<double>(confidence[above])> static_cast<double>(p.dynamic_threshold)) ++above;
      return above >= count ? above : count;
    }
    case Strategy::DynamicFactor: {
      int k = 1;
      for (int i = 1; i <= m; ++i) {
        if ((i + 1) * (1.0 - confidence[i - 1]) < p.dynamic_factor) k = i;
      }
      return k;
    }
    case Strategy::DynamicPmax: {
      int k = 0;
      for (double product = 1.0; k < m; ++k) {
        product *= confidence[k];
        if (product < p.dynamic_threshold) break;
      }
      return k > 1 ? k : 1;
    }
    case Strategy::EntropyBounded: {
      int k = 0;
      for (double sum = 0.0; k < m; ++k) {
        sum += entropy[k];
        if (sum > p.eb_threshold) break;
      }
      return k > 1 ? k : 1;
    }
    default:
      return count;
  }
}

}  // namespace jet
