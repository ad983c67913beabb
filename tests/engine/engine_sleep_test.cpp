// Sleep mode: sleep(1) moves the weights to host memory and frees the KV cache, wake_up brings
// them back bit for bit (plain, MoE and FP8 models: every tensor and checkpoint slot is moved), in
// either order and with a trainer's update in between; sleep(2) frees both; nothing generates or
// updates while asleep, and the errors say what to call.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "engine_test_util.h"
#include "jet/engine.h"
#include "model/checkpoint.h"

namespace {

std::string tiny_model(const std::string& arch, int seed) {
  return jet::test::tiny_model_folder("--arch " + arch + " --seed " + std::to_string(seed));
}

std::vector<jet::GenerationOutput> greedy(jet::Engine& engine) { return jet::test::greedy_decode(engine, 12); }

void expect_same(const std::vector<jet::GenerationOutput>& a, const std::vector<jet::GenerationOutput>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].token_ids, b[i].token_ids);
    EXPECT_EQ(a[i].logprobs, b[i].logprobs);  // bit for bit: the same weights, the same forwards
  }
}

struct Case {
  std::string arch;
  bool fp8;
};

class EngineSleep : public ::testing::TestWithParam<Case> {};

}  // namespace

TEST_P(EngineSleep, WakeGivesTheSameOutputsAndNothingRunsAsleep) {
  jet::EngineOptions o = jet::test::cpu_options(tiny_model(GetParam().arch, 1));
  if (GetParam().fp8) o.quantization = "fp8";
  jet::Engine engine(o);
  const auto before = greedy(engine);
  engine.sleep(1);
  EXPECT_TRUE(engine.is_sleeping());
  EXPECT_FALSE(engine.has_weights());
  jet::test::expect_error([&] { greedy(engine); }, "call wake_up() first");
  jet::Checkpoint ckpt(o.model);
  jet::test::expect_error([&] { engine.update_weights(jet::test::checkpoint_views(ckpt)); }, "wake_up() first");
  engine.sleep(1);  // asleep already: nothing changes
  engine.wake_up();
  EXPECT_FALSE(engine.is_sleeping());
  expect_same(greedy(engine), before);
  engine.wake_up();  // awake already: nothing changes
  expect_same(greedy(engine), before);
}

INSTANTIATE_TEST_SUITE_P(Families, EngineSleep,
                         ::testing::Values(Case{"sdar", false}, Case{"sdar_moe", false}, Case{"llada", false},
                                           Case{"sdar", true}, Case{"sdar_moe", true}),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return p.param.arch + (p.param.fp8 ? "_fp8" : "");
                         });

TEST(EngineSleepOrder, WeightsThenAnUpdateThenTheKvCache) {
  const std::string dir_a = tiny_model("sdar", 1), dir_b = tiny_model("sdar", 2);
  jet::Engine a(jet::test::cpu_options(dir_a)), b(jet::test::cpu_options(dir_b));
  const auto out_b = greedy(b);
  a.sleep(1);
  a.wake_up(/*weights=*/true, /*kv_cache=*/false);
  jet::Checkpoint ckpt_b(dir_b);
  a.update_weights(jet::test::checkpoint_views(ckpt_b));
  a.wake_up(/*weights=*/false, /*kv_cache=*/true);
  expect_same(greedy(a), out_b);
}

TEST(EngineSleepOrder, TheKvCacheFirstThenTheWeights) {
  jet::Engine a(jet::test::cpu_options(tiny_model("sdar", 1)));
  const auto before = greedy(a);
  a.sleep(1);
  a.wake_up(/*weights=*/false, /*kv_cache=*/true);
  EXPECT_TRUE(a.is_sleeping());
  jet::test::expect_error([&] { greedy(a); }, "call wake_up() first");
  a.wake_up(/*weights=*/true, /*kv_cache=*/false);
  expect_same(greedy(a), before);
}

TEST(EngineSleepOrder, LoadingAWholeSetEndsTheSleep) {
  const std::string dir_a = tiny_model("sdar", 1), dir_b = tiny_model("sdar", 2);
  jet::Engine a(jet::test::cpu_options(dir_a)), b(jet::test::cpu_options(dir_b));
  const auto out_b = greedy(b);
  a.sleep(1);
  jet::Checkpoint ckpt_b(dir_b);
  a.load_weights(jet::test::checkpoint_views(ckpt_b));
  EXPECT_FALSE(a.is_sleeping());
  a.wake_up();  // nothing left asleep: the loaded weights stay
  expect_same(greedy(a), out_b);
}

TEST(EngineSleepOrder, LevelTwoFreesTheWeightsTooAndBadLevelsAreRefused) {
  const std::string dir = tiny_model("sdar", 1);
  jet::Engine a(jet::test::cpu_options(dir));
  const auto before = greedy(a);
  jet::test::expect_error([&] { a.sleep(3); }, "level must be 1");
  jet::test::expect_error([&] { a.sleep(0); }, "level must be 1");
  a.sleep(2);
  EXPECT_FALSE(a.is_sleeping());
  EXPECT_FALSE(a.has_weights());
  a.wake_up();  // no weights to wake; the KV cache comes back
  jet::test::expect_error([&] { greedy(a); }, "weights were freed");
  jet::Checkpoint ckpt(dir);
  a.load_weights(jet::test::checkpoint_views(ckpt));
  expect_same(greedy(a), before);
}
