// The commit and stop rules of a finished block (docs/decoding.md §5), beside the Scheduler:
// which of its tokens join the completion, and whether the sequence ends there.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sequence.h"

namespace jet {

struct BlockCommit {
  std::vector<int32_t> new_tokens;  // the completion tokens this block added
  bool finished = false;            // the sequence ended: finish_reason is set
};

// Appends the block's tokens past the prompt to seq's completion (with their trajectory,
// logprobs and entropies), up to max_tokens and through the first stop token or stop string, and
// moves block_start to the next block. The sequence finishes with "stop" at a stop, else with
// "length" at max_tokens or when the next block would pass max_model_len; then its text is
// finished and its status set.
BlockCommit commit_block(Sequence& seq, const BlockRecord& block, int block_length, int max_model_len);

}  // namespace jet
