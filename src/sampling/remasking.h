// Remasking: the step schedule and the 11 strategies that choose which masked positions of a
// block to commit in a denoise step (docs/decoding.md §2 and §4). Pure host functions; the
// CPU backend's denoise_step calls them and the CUDA backend must agree with them.
#pragma once

#include <string_view>
#include <vector>

#include "core/error.h"  // the jet::Error these functions throw
#include "sampling/sampling_types.h"

namespace jet {

// "low_confidence_static" etc.; throws jet::Error listing the 11 names when unknown.
Strategy parse_strategy(std::string_view name);
std::string_view strategy_name(Strategy strategy);

// n_s = floor(B/S) + (step < B mod S); throws jet::Error unless 1 <= S <= B and 0 <= step < S.
int scheduled_count(int block_length, int denoising_steps, int step);

// What a strategy may look at for one masked position of the block.
struct PositionScore {
  int index = 0;  // block index, 0 <= index < B
  float confidence = 0.0f;
  float entropy = 0.0f;
  float margin = 0.0f;
  double random = 0.0;  // uniform(seed, position, step, kRandomStrategyLane); `random` only
};

// The block indices (increasing) to commit this step: every masked one when is_last, else the
// strategy's choice with n the scheduled count. Orderings break ties by the lower block index.
std::vector<int> select_positions(Strategy strategy, const std::vector<PositionScore>& masked, int n, bool is_last,
                                  const SlotParams& params, int block_length);

}  // namespace jet
