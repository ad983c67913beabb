// Sequence: the host-side state of one request as it moves through the engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/completion_text.h"
#include "engine/request.h"

namespace jet {

// A finished block as read back from the backend.
struct BlockRecord {
  std::vector<int32_t> tokens, trajectory;
  std::vector<float> logprobs, entropies;
};

enum class SeqStatus {
  Waiting,    // queued, holds no slot or pages
  Denoising,  // its current block still has masks (or, under token editing, post steps to take)
  Finished,
};

struct Sequence {
  size_t index = 0;      // position in the caller's prompt list
  uint64_t arrival = 0;  // admission order across the engine's life: newer = larger
  std::vector<int32_t> prompt;
  Request request;

  SeqStatus status = SeqStatus::Waiting;
  bool needs_prefill = false;
  int slot = -1;
  std::vector<int32_t> pages;  // KV-cache pages for positions [0, pages.size() * page_size)
  int num_cached = 0;          // prompt positions whose K/V an earlier sequence already wrote

  int block_start = 0;    // absolute position of the current block's first token
  int step_in_block = 0;  // denoise steps done on the current block (its current sub-block)
  int window_begin = 0;   // the current sub-block's first block position (0 without sub-blocks)
  // Token editing: the current block has no mask left, and post_steps steps have begun so.
  bool block_filled = false;
  int post_steps = 0;
  int global_step = 0;  // denoise steps done in total (trajectory base)
  int num_forwards = 0;
  // The previous block is committed but its K/V not yet written: the next forward saves it
  // (together with the current block's first denoising step).
  bool save_pending = false;
  // The current block's first position awaits its head step (shifted-logit models,
  // docs/decoding.md §1): the next forward saves the block before it and samples that position
  // from the save's last row.
  bool head_pending = false;

  // Committed completion (positions >= prompt length) and its per-token records.
  std::vector<int32_t> completion;
  std::vector<int32_t> trajectory;
  std::vector<float> logprobs;
  std::vector<float> entropies;
  std::string finish_reason;
  CompletionText text;  // the completion's text, searched for the stop strings

  int prompt_len() const { return static_cast<int>(prompt.size()); }
  // Where the first block starts.
  int num_prefill(int B) const { return prompt_len() / B * B; }
  // The end of what the prefill forward writes: num_prefill, except for a shifted-logit model
  // whose prompt ends on a block boundary, whose last prompt block is saved by the first block's
  // head step instead.
  int prefill_end(int B, bool shifted_logits) const {
    return shifted_logits && prompt_len() % B == 0 ? prompt_len() - B : num_prefill(B);
  }

  // Back to the state of a fresh request (preemption restarts from the prompt).
  void reset_progress() {
    status = SeqStatus::Waiting;
    needs_prefill = false;
    save_pending = false;
    head_pending = false;
    slot = -1;
    pages.clear();
    num_cached = 0;
    block_start = step_in_block = window_begin = global_step = num_forwards = post_steps = 0;
    block_filled = false;
    completion.clear();
    trajectory.clear();
    logprobs.clear();
    entropies.clear();
    finish_reason.clear();
    text.reset();
  }
};

}  // namespace jet
