// Request: a prompt's SamplingParams validated against the engine and resolved into what the
// decode loop needs (slot parameters for the backend, schedule length, stop set, budget).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "jet/engine.h"

namespace jet {

struct Request {
  SlotParams slot;
  int denoising_steps = 4;
  int sub_block_length = 0;  // b, the positions a step's candidates lie in (B without sub-blocks)
  bool editing = false;      // token editing (slot.editing_threshold its bar)
  int max_post_steps = 16;   // under editing: steps a block may take once no mask is left
  int max_tokens = 64;
  std::vector<int32_t> stop_ids;  // EOS (unless ignore_eos) + stop_token_ids, sorted, unique
  std::vector<std::string> stop_strings;
};

// What a request is checked against.
struct RequestLimits {
  int block_length = 4;
  int vocab = 0;
  int32_t mask_id = 0;
  std::vector<int32_t> eos_ids;
  bool shifted_logits = false;  // the model's logits are shifted (no token editing)
};

// Throws jet::Error naming the offending field and its allowed range. A request without a seed
// gets `fallback_seed`; prompt_len places diversity_enforce's barrier.
Request resolve_request(const SamplingParams& params, const RequestLimits& limits, int prompt_len,
                        uint64_t fallback_seed);

}  // namespace jet
