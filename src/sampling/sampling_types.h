// The plain data that sampling and remasking read and the backends' decode ops carry (in
// DecodeState, backend.h): a slot's sampling parameters and strategy, a masked position's
// sample, a denoise step's row. No backend dependency: sampling sits below the backends.
#pragma once

#include <cstdint>

namespace jet {

enum class Strategy : int32_t {
  Sequential,
  AntiSequential,
  Random,
  Dilated,
  LowConfidenceStatic,
  MarginStatic,
  EntropyStatic,
  LowConfidenceDynamic,
  DynamicFactor,
  DynamicPmax,
  EntropyBounded,
};

// Sampling parameters of the sequence occupying a slot (plain data, copied to the backend).
// epsilon_greedy and sequential_below are the original's exploration modifiers (epsilon_greedy,
// diversity_enforce), which change the strategy of a step (step_strategy, remasking_rules.h).
struct SlotParams {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;
  float repetition_penalty = 1.0f;
  float dynamic_threshold = 0.9f;
  float dynamic_factor = 1.0f;
  float eb_threshold = 0.35f;
  float epsilon_greedy = 0.0f;  // chance that a denoise step uses `random` instead of `strategy`
  int32_t top_k = 0;
  Strategy strategy = Strategy::LowConfidenceStatic;
  int32_t mask_id = 0;
  int32_t sequential_below = 0;  // blocks that start below this position use `sequential` (0: none)
  // Token editing (LLaDA2.1's T2T, docs/decoding.md §4): a committed position of the block takes
  // its new sample when that is more confident than this; read only for rows with edits_begin < B.
  float editing_threshold = 0.0f;
  uint64_t seed = 0;
};

// A masked position's sample (docs/decoding.md §3), kept in the decode state between a step's
// sample_positions and its commit_step.
struct PositionSample {
  int32_t token = 0;        // the candidate x̂
  float confidence = 0.0f;  // probs[x̂] of the unfiltered distribution
  float logprob = 0.0f;     // ln(max(confidence, 1e-12))
  float entropy = 0.0f;     // nats
  float margin = 0.0f;      // largest minus second largest probability
};

// One denoising sequence in a denoise step. The step's candidates are the block's masked
// positions j in [candidates_begin, candidates_end): the whole block, or its current sub-block
// (docs/decoding.md §2), or in a head step (§1 "Shifted logits") position 0 alone. Under token
// editing (§4) the committed positions j >= edits_begin are sampled too, as edit candidates.
// Only these have logits rows (other positions would never be read, and the LM head is the
// largest GEMM of a forward): the k-th of them, in increasing position order, reads logits row
// logits_row0 + k (has_logits_row, remasking_rules.h); the rows of a step list their logits rows
// back to back, in row order. The strategy picks among the candidates; the last step (is_last)
// commits them all.
struct StepRow {
  int32_t slot = 0;
  int32_t position0 = 0;               // absolute position of the block's first token
  int32_t global_step = 0;             // the sequence's denoise step counter (0-based, across blocks)
  int32_t n_sched = 0;                 // scheduled commit count for this step
  int32_t is_last = 0;                 // last allowed step: commit every remaining mask
  int32_t logits_row0 = 0;             // logits row of the block's first candidate
  int32_t candidates_begin = 0;        // block positions before it are no candidates
  int32_t candidates_end = INT32_MAX;  // nor those at or past it
  int32_t edits_begin = INT32_MAX;     // committed positions at or past it may be edited (INT32_MAX: none)
};

}  // namespace jet
