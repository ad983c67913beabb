// Tensor parallelism on the CPU backend (ranks are threads joined by the host all-reduce): every
// family decodes the same tokens at tensor_parallel_size 2 and 4 as at 1, greedy and seeded
// sampling alike (the ranks sum fp32 partial products, so the logits agree to rounding), with
// key/value heads repeated where they are fewer than the ranks; weight updates and sleep reach
// every rank's shard; sizes that do not divide the model are refused by name; FP8 ranks slice the
// whole model's codes and scales. Expert parallelism (whole experts per rank) decodes the same too.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine_test_util.h"
#include "jet/engine.h"
#include "model/checkpoint.h"

namespace {

jet::EngineOptions options(const std::string& dir, int tp) {
  jet::EngineOptions o = jet::test::cpu_options(dir);
  o.tensor_parallel_size = tp;
  o.num_threads = 2;
  o.num_kvcache_pages = 64;
  o.kvcache_page_size = 16;
  return o;
}

std::vector<jet::SamplingParams> greedy_and_seeded() {
  jet::SamplingParams greedy = jet::test::greedy(12);
  jet::SamplingParams seeded = greedy;
  seeded.temperature = 1.0;
  seeded.top_p = 0.9;
  seeded.seed = 1234;
  return {greedy, seeded, greedy, seeded};
}

// Draws that the ranks of an LM head split by vocabulary take from each other's parts (greedy,
// plain temperature, top-k, top-k with top-p), where greedy_and_seeded's top_p alone makes the
// ranks put the whole rows together.
std::vector<jet::SamplingParams> drawn_from_parts() {
  jet::SamplingParams greedy = jet::test::greedy(12), warm = greedy, top_k = greedy, nucleus = greedy;
  warm.temperature = 1.0;
  warm.seed = 7;
  top_k.temperature = 0.8;
  top_k.top_k = 5;
  top_k.seed = 8;
  nucleus.temperature = 1.0;
  nucleus.top_k = 20;
  nucleus.top_p = 0.8;
  nucleus.seed = 9;
  nucleus.repetition_penalty = 1.3;
  return {greedy, warm, top_k, nucleus};
}

std::vector<jet::GenerationOutput> decode(jet::Engine& engine,
                                          const std::vector<jet::SamplingParams>& params = greedy_and_seeded()) {
  const std::vector<jet::Prompt> prompts = {std::vector<int32_t>{5, 6, 7, 8, 9, 10}, std::vector<int32_t>{11, 12, 13},
                                            std::vector<int32_t>{20, 21}, std::vector<int32_t>{30, 31, 32, 33, 34}};
  return engine.generate(prompts, params);
}

void expect_same_decodes(const std::vector<jet::GenerationOutput>& whole,
                         const std::vector<jet::GenerationOutput>& split) {
  ASSERT_EQ(whole.size(), split.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(whole[i].token_ids, split[i].token_ids) << "request " << i;
    EXPECT_EQ(whole[i].trajectory, split[i].trajectory) << "request " << i;
    ASSERT_EQ(whole[i].logprobs.size(), split[i].logprobs.size());
    for (size_t j = 0; j < whole[i].logprobs.size(); ++j) {
      EXPECT_NEAR(whole[i].logprobs[j], split[i].logprobs[j], 1e-4) << "request " << i << " token " << j;
    }
  }
}

class TensorParallelFamilies : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(TensorParallelFamilies, SplitRanksDecodeWhatOneRankDoes) {
  // 4 query heads over 2 key/value heads (llada: 4): at 4 ranks each key/value head is repeated.
  const std::string dir = jet::test::tiny_model_folder("--arch " + GetParam() + " --seed 3 --layers 3");
  jet::Engine whole(options(dir, 1));
  const std::vector<jet::GenerationOutput> expected = decode(whole), expected_drawn = decode(whole, drawn_from_parts());
  for (int tp : {2, 4}) {
    SCOPED_TRACE("tensor_parallel_size " + std::to_string(tp));
    jet::Engine split(options(dir, tp));
    expect_same_decodes(expected, decode(split));
    expect_same_decodes(expected_drawn, decode(split, drawn_from_parts()));
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TensorParallelFamilies,
                         ::testing::Values("sdar", "sdar_moe", "llada", "llada2_moe", "fast_dllm_v2", "dream"));

// Expert parallelism: each rank holds whole experts (8 over 2 or 4 ranks; LLaDA2's 8 in 4 groups
// too, so a rank's run of experts cuts across its groups), the routes to another rank's experts
// add nothing there, and the all-reduce after the MLP sums them in.
TEST(TensorParallel, ExpertParallelRanksDecodeWhatOneRankDoes) {
  for (const std::string arch : {"sdar_moe", "llada2_moe"}) {
    SCOPED_TRACE(arch);
    const std::string dir = jet::test::tiny_model_folder("--arch " + arch + " --seed 3 --layers 3");
    jet::Engine whole(options(dir, 1));
    const std::vector<jet::GenerationOutput> expected = decode(whole);
    for (int tp : {2, 4}) {
      SCOPED_TRACE("tensor_parallel_size " + std::to_string(tp));
      jet::EngineOptions o = options(dir, tp);
      o.enable_expert_parallel = true;
      jet::Engine split(o);
      expect_same_decodes(expected, decode(split));
    }
  }
}

TEST(TensorParallel, ExpertParallelNeedsExpertsThatDivide) {
  jet::EngineOptions o = options(jet::test::tiny_model_folder("--arch sdar_moe --seed 1 --experts 6 --top-k 2"), 4);
  o.enable_expert_parallel = true;
  jet::test::expect_error([&] { jet::Engine engine(o); }, "num_experts 6 is not a multiple of 4");
  o = options(jet::test::tiny_model_folder("--arch sdar --seed 1"), 2);
  o.enable_expert_parallel = true;
  jet::test::expect_error([&] { jet::Engine engine(o); }, "has no mixture-of-experts layers to split");
}

// Each rank's share of each expert, or under expert parallelism the whole experts it holds.
TEST(TensorParallel, UpdatesAndSleepReachEveryShard) {
  const std::string dir = jet::test::tiny_model_folder("--arch sdar_moe --seed 4");
  const std::string other = jet::test::tiny_model_folder("--arch sdar_moe --seed 5");
  jet::Engine reference(options(other, 1));
  const std::vector<jet::GenerationOutput> expected = decode(reference);
  const jet::Checkpoint ckpt(other);
  for (bool expert_parallel : {false, true}) {
    SCOPED_TRACE(expert_parallel ? "expert parallel" : "experts split by width");
    jet::EngineOptions o = options(dir, 2);
    o.enable_expert_parallel = expert_parallel;
    jet::Engine split(o);
    split.update_weights(jet::test::checkpoint_views(ckpt));
    expect_same_decodes(expected, decode(split));
    split.sleep(1);
    split.wake_up();
    expect_same_decodes(expected, decode(split));
  }
}

TEST(TensorParallel, SizesThatDoNotDivideTheModelAreRefused) {
  const std::string dir = jet::test::tiny_model_folder("--arch sdar --seed 1");
  // 4 heads, 2 key/value heads, MLP 128.
  jet::test::expect_error([&] { jet::Engine engine(options(dir, 3)); }, "num_attention_heads 4 is not a multiple of 3");
  jet::test::expect_error([&] { jet::Engine engine(options(dir, 8)); }, "num_attention_heads 4 is not a multiple of 8");
  jet::test::expect_error([&] { jet::Engine engine(options(dir, 0)); }, "tensor_parallel_size must be in [1, 64]");
  const std::string odd = jet::test::tiny_model_folder("--arch sdar --seed 1 --intermediate 102");
  jet::test::expect_error([&] { jet::Engine engine(options(odd, 4)); }, "intermediate_size 102 is not a multiple of 4");
}

// FP8 ranks hold the whole model's codes and scales, but quantize their activations over their own
// columns (o and down take a slice of each row), a W8A8 quantization of its own: its first blocks
// agree with the whole model's FP8 about as often as FP8 agrees with float, where a mis-sliced
// weight would agree by chance only: two thirds of the tokens is the bar for both.
TEST(TensorParallel, Fp8RanksDecodeLikeTheWholeFp8Model) {
  for (const std::string arch : {"sdar", "sdar_moe", "llada"}) {
    SCOPED_TRACE(arch);
    const std::string dir = jet::test::tiny_model_folder("--arch " + arch + " --seed 6");
    std::vector<jet::Prompt> prompts;
    for (int i = 0; i < 32; ++i) prompts.push_back(std::vector<int32_t>{5 + i, 7 + 2 * i, 9 + 3 * i});
    auto first_block = [&](int tp, bool fp8, bool expert_parallel = false) {
      jet::EngineOptions o = options(dir, tp);
      if (fp8) o.quantization = "fp8";
      o.enable_expert_parallel = expert_parallel;
      jet::Engine engine(o);
      return engine.generate(prompts, {jet::test::greedy(4)});
    };
    const auto fp8_1 = first_block(1, true), fp8_2 = first_block(2, true), float_1 = first_block(1, false);
    // Under expert parallelism the experts are quantized whole, as on one rank.
    const auto fp8_ep = arch == "sdar_moe" ? first_block(2, true, true) : fp8_2;
    int same_tp = 0, same_ep = 0, same_fp8 = 0, total = 0;  // tokens equal: split vs whole FP8, float vs FP8
    for (size_t i = 0; i < prompts.size(); ++i) {
      for (size_t j = 0; j < fp8_1[i].completion_ids.size(); ++j) {
        same_tp += fp8_2[i].completion_ids[j] == fp8_1[i].completion_ids[j];
        same_ep += fp8_ep[i].completion_ids[j] == fp8_1[i].completion_ids[j];
        same_fp8 += float_1[i].completion_ids[j] == fp8_1[i].completion_ids[j];
        ++total;
      }
    }
    EXPECT_GE(3 * same_tp, 2 * total) << same_tp << " of " << total << " tokens equal (float vs FP8: " << same_fp8
                                      << ")";
    EXPECT_GE(3 * same_ep, 2 * total) << same_ep << " of " << total << " tokens equal under expert parallelism";
    EXPECT_GE(3 * same_fp8, 2 * total) << "float and FP8 agree on " << same_fp8 << " of " << total;
  }
}
