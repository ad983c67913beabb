// EngineOptions::load_format: "dummy" decodes with random weights of config.json's shapes from a
// folder that has no checkpoint (every family), deterministically; other values are rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "jet/engine.h"
#include "engine_test_util.h"

namespace {

jet::EngineOptions dummy_options(const std::string& dir) {
  jet::EngineOptions o = jet::test::cpu_options(dir);
  o.load_format = "dummy";
  return o;
}

std::vector<jet::GenerationOutput> greedy(jet::Engine& engine) { return jet::test::greedy_decode(engine, 8); }

}  // namespace

TEST(EngineLoadFormat, DummyDecodesEveryFamilyWithoutACheckpoint) {
  for (const std::string arch : {"sdar", "sdar_moe", "llada"}) {
    SCOPED_TRACE(arch);
    const std::string dir = jet::test::tiny_model_folder("--arch " + arch + " --no-weights");
    jet::Engine engine(dummy_options(dir));
    const auto outputs = greedy(engine);
    ASSERT_EQ(outputs.size(), 2u);
    for (const jet::GenerationOutput& out : outputs) {
      ASSERT_EQ(out.completion_ids.size(), 8u);
      ASSERT_EQ(out.logprobs.size(), 8u);
      for (size_t i = 0; i < out.logprobs.size(); ++i) {
        EXPECT_TRUE(std::isfinite(out.logprobs[i]) && out.logprobs[i] <= 0.0f) << out.logprobs[i];
        EXPECT_TRUE(std::isfinite(out.entropies[i]) && out.entropies[i] > 0.0f) << out.entropies[i];
        EXPECT_GE(out.completion_ids[i], 0);
        EXPECT_LT(out.completion_ids[i], engine.summary().vocab);
      }
    }
    // Not a degenerate model: the two prompts do not decode to the same tokens.
    EXPECT_NE(outputs[0].completion_ids, outputs[1].completion_ids);
  }
}

TEST(EngineLoadFormat, DummyWeightsAreTheSameEveryTime) {
  const std::string dir = jet::test::tiny_model_folder("--arch sdar --no-weights");
  jet::Engine a(dummy_options(dir)), b(dummy_options(dir));
  const auto out_a = greedy(a), out_b = greedy(b);
  for (size_t i = 0; i < out_a.size(); ++i) {
    EXPECT_EQ(out_a[i].completion_ids, out_b[i].completion_ids);
    EXPECT_EQ(out_a[i].logprobs, out_b[i].logprobs);
  }
}

TEST(EngineLoadFormat, AutoNeedsTheCheckpointAndOtherFormatsAreRejected) {
  const std::string dir = jet::test::tiny_model_folder("--arch sdar --no-weights");
  jet::EngineOptions o = dummy_options(dir);
  o.load_format = "auto";
  EXPECT_THROW(jet::Engine{o}, jet::Error);
  o.load_format = "random";
  try {
    jet::Engine engine(o);
    FAIL() << "load_format 'random' was accepted";
  } catch (const jet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("load_format must be 'auto' or 'dummy', got 'random'"), std::string::npos)
        << e.what();
  }
}

TEST(EngineLoadFormat, DummyWeightsBeyondTheHostMemoryAreAnErrorNotAKill) {
  // About 340 billion parameters: 680 GB of bf16, more than any machine this runs on has. Linux
  // would grant the memory and kill the process as the weights fill it; the engine refuses first.
  const std::string dir = jet::test::tiny_model_folder(
      "--arch sdar --no-weights --layers 400 --hidden 8192 --heads 64 --kv-heads 8 --head-dim 128 "
      "--intermediate 28672");
  try {
    jet::Engine engine(dummy_options(dir));
    FAIL() << "680 GB of random weights were accepted";
  } catch (const jet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("MiB of bf16 are made in host memory, more than the"), std::string::npos)
        << e.what();
  }
}
