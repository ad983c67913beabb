// Validation of SamplingParams (every rule names the field) and resolution into a Request.
#include "engine/request.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "sampling/remasking.h"

namespace jet {

namespace {

// Temperatures below this sample as greedy (as vLLM does): dividing logits by them overflows fp32.
constexpr double kGreedyBelow = 1e-5;
constexpr double kMaxTemperature = 1e6;
constexpr double kMinPenalty = 1e-6;  // and 1 / kMinPenalty at most
// Stop strings are searched in the text after every committed token: bounded, so that the search
// stays a small part of the step.
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopBytes = 1024;
// Edits can go back and forth: the steps a block may take after its last mask are bounded, so
// that no request can hold its slot for ever.
constexpr int kMaxPostSteps = 1024;

}  // namespace

Request resolve_request(const SamplingParams& p, const RequestLimits& lim, int prompt_len, uint64_t fallback_seed) {
  const int B = lim.block_length;
  // The sampler divides the fp32 logits by the temperature and the penalty: past these bounds the
  // quotients overflow fp32 (and every sample is NaN).
  JET_CHECK(std::isfinite(p.temperature) && p.temperature >= 0 && p.temperature <= kMaxTemperature,
            "temperature must be in [0, ", kMaxTemperature, "] (0 = greedy), got ", p.temperature);
  JET_CHECK(std::isfinite(p.top_p) && p.top_p > 0 && p.top_p <= 1, "top_p must be in (0, 1], got ", p.top_p);
  JET_CHECK(std::isfinite(p.repetition_penalty) && p.repetition_penalty >= kMinPenalty &&
                p.repetition_penalty <= 1 / kMinPenalty,
            "repetition_penalty must be in [", kMinPenalty, ", ", 1 / kMinPenalty, "], got ", p.repetition_penalty);
  JET_CHECK(p.max_tokens >= 1, "max_tokens must be >= 1, got ", p.max_tokens);
  JET_CHECK(p.block_length == 0 || p.block_length == B, "block_length ", p.block_length,
            " differs from the engine's block_length ", B, " (set it when building the engine; 0 means the engine's)");
  JET_CHECK(p.sub_block_length == 0 || (p.sub_block_length >= 1 && B % p.sub_block_length == 0),
            "sub_block_length must divide block_length = ", B, " (or be 0: off), got ", p.sub_block_length);
  const int window = p.sub_block_length > 0 ? p.sub_block_length : B;
  JET_CHECK(p.denoising_steps >= 1 && p.denoising_steps <= window, "denoising_steps must be in [1, ",
            p.sub_block_length > 0 ? "sub_block_length = " : "block_length = ", window, "], got ", p.denoising_steps);
  if (p.editing_threshold) {
    const double t = *p.editing_threshold;
    JET_CHECK(std::isfinite(t) && t >= 0 && t <= 1, "editing_threshold must be in [0, 1] (or unset: off), got ", t);
    JET_CHECK(!lim.shifted_logits, "editing_threshold: token editing needs a model without shifted logits (this ",
              "model predicts each position from the one before it)");
    JET_CHECK(window == B, "editing_threshold cannot be combined with sub_block_length (", p.sub_block_length, ")");
  }
  JET_CHECK(p.max_post_steps >= 0 && p.max_post_steps <= kMaxPostSteps, "max_post_steps must be in [0, ", kMaxPostSteps,
            "], got ", p.max_post_steps);
  JET_CHECK(std::isfinite(p.dynamic_threshold) && p.dynamic_threshold >= 0 && p.dynamic_threshold <= 1,
            "dynamic_threshold must be in [0, 1], got ", p.dynamic_threshold);
  JET_CHECK(std::isfinite(p.dynamic_factor) && p.dynamic_factor > 0, "dynamic_factor must be > 0, got ",
            p.dynamic_factor);
  JET_CHECK(std::isfinite(p.eb_threshold) && p.eb_threshold >= 0, "eb_threshold must be >= 0, got ", p.eb_threshold);
  JET_CHECK(p.diversity_enforce_barrier >= -1, "diversity_enforce_barrier must be >= 0 (or -1: off), got ",
            p.diversity_enforce_barrier);
  JET_CHECK(std::isfinite(p.epsilon_greedy) && p.epsilon_greedy >= 0 && p.epsilon_greedy <= 1,
            "epsilon_greedy must be in [0, 1], got ", p.epsilon_greedy);
  for (int32_t id : p.stop_token_ids) {
    JET_CHECK(id >= 0 && id < lim.vocab, "stop_token_ids: id ", id, " is outside the vocabulary [0, ", lim.vocab, ")");
  }

  JET_CHECK(p.stop.size() <= kMaxStopStrings, "stop: at most ", kMaxStopStrings, " stop strings, got ", p.stop.size());
  for (const std::string& stop : p.stop) {
    JET_CHECK(!stop.empty() && stop.size() <= kMaxStopBytes, "stop: every stop string must hold 1 to ", kMaxStopBytes,
              " bytes, got one of ", stop.size());
  }

  Request r;
  r.slot.temperature = p.temperature < kGreedyBelow ? 0.0f : static_cast<float>(p.temperature);
  r.slot.top_k = std::max(0, p.top_k);
  r.slot.top_p = static_cast<float>(p.top_p);
  r.slot.repetition_penalty = static_cast<float>(p.repetition_penalty);
  r.slot.strategy = parse_strategy(p.remasking_strategy);
  r.slot.dynamic_threshold = static_cast<float>(p.dynamic_threshold);
  r.slot.dynamic_factor = static_cast<float>(p.dynamic_factor);
  r.slot.eb_threshold = static_cast<float>(p.eb_threshold);
  r.slot.epsilon_greedy = static_cast<float>(p.epsilon_greedy);
  // A block starting at position q has q - prompt_len completion tokens before it (at most 0 for
  // the first block); positions fit in int32, so the bound saturates there.
  if (p.diversity_enforce_barrier >= 0) {
    r.slot.sequential_below =
        static_cast<int32_t>(std::min<int64_t>(INT32_MAX, int64_t{prompt_len} + p.diversity_enforce_barrier + 1));
  }
  r.slot.mask_id = lim.mask_id;
  r.slot.seed = p.seed.value_or(fallback_seed);
  r.denoising_steps = p.denoising_steps;
  r.sub_block_length = window;
  r.editing = p.editing_threshold.has_value();
  r.slot.editing_threshold = static_cast<float>(p.editing_threshold.value_or(0.0));
  r.max_post_steps = p.max_post_steps;
  r.max_tokens = p.max_tokens;
  r.stop_ids = p.stop_token_ids;
  if (!p.ignore_eos) r.stop_ids.insert(r.stop_ids.end(), lim.eos_ids.begin(), lim.eos_ids.end());
  std::sort(r.stop_ids.begin(), r.stop_ids.end());
  r.stop_ids.erase(std::unique(r.stop_ids.begin(), r.stop_ids.end()), r.stop_ids.end());
  r.stop_strings = p.stop;
  return r;
}

}  // namespace jet
