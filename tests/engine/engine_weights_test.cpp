// The RL weight APIs: in-place updates, offload/free and reload, and that a bad update changes
// nothing. Model A and model B are tiny SDAR models of the same shape with different weights.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "jet/engine.h"
#include "model/checkpoint.h"
#include "engine_test_util.h"

namespace {

std::string tiny_model(int seed) { return jet::test::tiny_model_folder("--arch sdar --seed " + std::to_string(seed)); }

std::vector<jet::GenerationOutput> greedy(jet::Engine& engine) { return jet::test::greedy_decode(engine, 12); }

jet::EngineOptions options(const std::string& dir) { return jet::test::cpu_options(dir); }

class EngineWeights : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_a = new std::string(tiny_model(1));
    dir_b = new std::string(tiny_model(2));
  }
  static std::string* dir_a;
  static std::string* dir_b;
};
std::string* EngineWeights::dir_a = nullptr;
std::string* EngineWeights::dir_b = nullptr;

}  // namespace

TEST_F(EngineWeights, UpdateWithModelBGivesModelBOutputs) {
  jet::Engine a(options(*dir_a)), b(options(*dir_b));
  const auto out_a = greedy(a), out_b = greedy(b);
  ASSERT_NE(out_a[0].completion_ids, out_b[0].completion_ids) << "the two models should differ";
  jet::Checkpoint ckpt_b(*dir_b);
  a.update_weights(jet::test::checkpoint_views(ckpt_b));
  const auto updated = greedy(a);
  for (size_t i = 0; i < updated.size(); ++i) EXPECT_EQ(updated[i].token_ids, out_b[i].token_ids);
}

TEST_F(EngineWeights, BadUpdateChangesNothing) {
  jet::Engine a(options(*dir_a));
  const auto before = greedy(a);
  jet::Checkpoint ckpt_b(*dir_b);
  auto views = jet::test::checkpoint_views(ckpt_b);
  views.back().shape[0] += 1;  // one mis-shaped tensor among good ones
  try {
    a.update_weights(views);
    FAIL() << "expected a shape error";
  } catch (const jet::Error& e) {
    EXPECT_NE(std::string(e.what()).find(views.back().name), std::string::npos) << e.what();
  }
  views = jet::test::checkpoint_views(ckpt_b);
  views[0].name = "model.layers.99.nonsense.weight";
  EXPECT_THROW(a.update_weights(views), jet::Error);
  const auto after = greedy(a);
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i].token_ids, before[i].token_ids);
}

TEST_F(EngineWeights, FreeThenReloadRestoresGeneration) {
  jet::Engine a(options(*dir_a));
  const auto before = greedy(a);
  a.free_all_resources();
  EXPECT_FALSE(a.has_weights());
  try {
    greedy(a);
    FAIL() << "generation without weights must fail";
  } catch (const jet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("weights were freed"), std::string::npos) << e.what();
  }
  a.reload_from_path(*dir_a);
  const auto after = greedy(a);
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i].token_ids, before[i].token_ids);
}

TEST_F(EngineWeights, OffloadThenLoadWeights) {
  jet::Engine a(options(*dir_a)), b(options(*dir_b));
  const auto out_b = greedy(b);
  a.offload_parameters();
  jet::Checkpoint ckpt_b(*dir_b);
  auto views = jet::test::checkpoint_views(ckpt_b);
  views.pop_back();  // an incomplete set is refused
  EXPECT_THROW(a.load_weights(views), jet::Error);
  a.load_weights(jet::test::checkpoint_views(ckpt_b));
  const auto loaded = greedy(a);
  for (size_t i = 0; i < loaded.size(); ++i) EXPECT_EQ(loaded[i].token_ids, out_b[i].token_ids);
}
