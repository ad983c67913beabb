// The shared sampling flags (sampling_flags.h).
#include "sampling_flags.h"

#include <algorithm>
#include <cstdint>

namespace jet::cli {

const char* const kSamplingFlagsHelp = R"(Sampling (docs/decoding.md)
  --temperature T           0 = greedy (default 1.0)
  --top-k K                 0 = off (default 0)
  --top-p P                 in (0, 1], 1 = off (default 1.0)
  --repetition-penalty R    (default 1.0 = off)
  --max-tokens N            completion tokens at most (default 64)
  --denoising-steps S       steps per block, 1..B (default 4, capped at B), or per sub-block
  --sub-block-length N      denoise the block N positions at a time, left to right, each with
                            its own S steps (Fast-dLLM v2's sub-blocks; N divides B; default off)
  --editing-threshold X     token editing (LLaDA2.1's T2T): a committed token of the block is
                            replaced by a sample more confident than X, in [0, 1]; the block
                            ends after a step that changed nothing (default off)
  --max-post-steps N        with editing: steps a block may take once no mask is left,
                            0..1024 (default 16)
  --strategy NAME           remasking strategy (default low_confidence_static); one of
                            sequential, anti_sequential, random, dilated, low_confidence_static,
                            margin_static, entropy_static, low_confidence_dynamic, dynamic_factor,
                            dynamic_pmax, entropy_bounded
  --dynamic-threshold X     low_confidence_dynamic / dynamic_pmax threshold (default 0.9)
  --dynamic-factor X        dynamic_factor's factor (default 1.0)
  --eb-threshold X          entropy_bounded's entropy budget (default 0.35)
  --diversity-enforce-barrier N
                            exploration: blocks begun with at most N completion tokens use
                            sequential (the original's diversity_enforce; default off)
  --epsilon-greedy E        exploration: each denoise step uses random instead of the strategy
                            with probability E, in [0, 1] (default 0 = off)
  --seed N                  reproducible sampling
  --stop-token-ids A,B,...  extra stop tokens
  --stop TEXT               a stop string: the completion ends where its text first holds it,
                            and the text stops before it
  --ignore-eos              do not stop at the model's EOS tokens

)";

std::set<std::string> with_sampling_value_flags(std::set<std::string> flags) {
  flags.insert({"--temperature", "--top-k", "--top-p", "--repetition-penalty", "--max-tokens", "--denoising-steps",
                "--strategy", "--dynamic-threshold", "--dynamic-factor", "--eb-threshold", "--seed", "--stop-token-ids",
                "--stop", "--diversity-enforce-barrier", "--epsilon-greedy", "--sub-block-length",
                "--editing-threshold", "--max-post-steps"});
  return flags;
}

std::set<std::string> with_sampling_bool_flags(std::set<std::string> flags) {
  flags.insert("--ignore-eos");
  return flags;
}

SamplingParams read_sampling(const ArgParser& args, const Engine& engine) {
  SamplingParams p;
  p.temperature = args.get_double("--temperature", p.temperature);
  p.top_k = args.get_int32("--top-k", p.top_k);
  p.top_p = args.get_double("--top-p", p.top_p);
  p.repetition_penalty = args.get_double("--repetition-penalty", p.repetition_penalty);
  p.max_tokens = args.get_int32("--max-tokens", p.max_tokens);
  p.sub_block_length = args.get_int32("--sub-block-length", p.sub_block_length);
  p.denoising_steps = args.get_int32("--denoising-steps", default_denoising_steps(engine, p.sub_block_length));
  if (args.has("--editing-threshold")) p.editing_threshold = args.get_double("--editing-threshold", 0.0);
  p.max_post_steps = args.get_int32("--max-post-steps", p.max_post_steps);
  p.remasking_strategy = args.get("--strategy").value_or(p.remasking_strategy);
  p.dynamic_threshold = args.get_double("--dynamic-threshold", p.dynamic_threshold);
  p.dynamic_factor = args.get_double("--dynamic-factor", p.dynamic_factor);
  p.eb_threshold = args.get_double("--eb-threshold", p.eb_threshold);
  p.diversity_enforce_barrier = args.get_int32("--diversity-enforce-barrier", p.diversity_enforce_barrier);
  p.epsilon_greedy = args.get_double("--epsilon-greedy", p.epsilon_greedy);
  p.ignore_eos = args.has("--ignore-eos");
  if (args.has("--seed")) {
    const long long seed = args.get_int("--seed", 0);
    JET_CHECK(seed >= 0, "flag --seed expects a non-negative integer, got ", seed);
    p.seed = static_cast<uint64_t>(seed);
  }
  if (args.has("--stop-token-ids")) {
    for (long long id : args.get_int_list("--stop-token-ids", "")) {
      JET_CHECK(id >= 0 && id <= INT32_MAX, "flag --stop-token-ids holds ", id, ", not a token id");
      p.stop_token_ids.push_back(static_cast<int32_t>(id));
    }
  }
  if (auto stop = args.get("--stop")) p.stop = {*stop};
  engine.check_params(p);
  return p;
}

int default_denoising_steps(const Engine& engine, int sub_block_length) {
  return std::min(SamplingParams{}.denoising_steps,
                  sub_block_length > 0 ? sub_block_length : engine.summary().block_length);
}

}  // namespace jet::cli
