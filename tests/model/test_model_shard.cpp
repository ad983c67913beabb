// ModelShard on the real configurations: each rank's heads and widths at the sizes users run,
// key/value heads repeated when fewer than the ranks (each rank's query heads read its one), and
// a refusal naming every key a size does not divide; under expert parallelism runs of whole experts.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/model_config.h"
#include "model/model_shard.h"
#include "model_test_util.h"
#include "real_configs.h"

using namespace jet;
using namespace jet::test;

namespace {

ModelConfig load(const Json& config) { return config_from_json(config); }

}  // namespace

TEST(ModelShard, SplitsSdar4bHeadsAndMlp) {
  const ModelConfig c = load(sdar_4b_config());  // 32 q / 8 kv heads, MLP 9728
  const ModelShard s = make_shard(c, 1, 2);
  EXPECT_EQ(s.heads, 16);
  EXPECT_EQ(s.head0, 16);
  EXPECT_EQ(s.kv_heads, 4);
  EXPECT_EQ(s.kv_head0, 4);
  EXPECT_EQ(s.intermediate, 4864);
  EXPECT_FALSE(s.whole());
  EXPECT_TRUE(make_shard(c, 0, 1).whole());
}

TEST(ModelShard, RepeatsKeyValueHeadsFewerThanTheRanks) {
  const ModelConfig c = load(sdar_30b_moe_config());  // 32 q / 4 kv heads, experts of width 768
  for (int rank = 0; rank < 8; ++rank) {
    const ModelShard s = make_shard(c, rank, 8);
    EXPECT_EQ(s.heads, 4);
    EXPECT_EQ(s.kv_heads, 1);
    // Query head h reads key/value head h / 8: this rank's four all read rank / 2.
    EXPECT_EQ(s.kv_head0, rank / 2) << "rank " << rank;
    EXPECT_EQ(s.moe_intermediate, 96);
  }
}

TEST(ModelShard, SplitsLlada2MiniSharedExpertAndDenseLayer) {
  const ModelConfig c = load(llada2_mini_config());
  const ModelShard s = make_shard(c, 0, 4);
  EXPECT_EQ(s.intermediate, c.intermediate / 4);
  EXPECT_EQ(s.moe_intermediate, c.moe_intermediate / 4);
  EXPECT_EQ(s.shared_intermediate, c.shared_expert_intermediate / 4);
}

TEST(ModelShard, ExpertParallelRanksHoldRunsOfWholeExperts) {
  const ModelConfig c = load(sdar_30b_moe_config());  // 128 experts of width 768
  for (int rank = 0; rank < 8; ++rank) {
    const ModelShard s = make_shard(c, rank, 8, /*expert_parallel=*/true);
    EXPECT_EQ(s.experts, 16);
    EXPECT_EQ(s.expert0, 16 * rank);
    EXPECT_EQ(s.moe_intermediate, 768);  // whole experts
    EXPECT_EQ(s.heads, 4);               // attention is split as without it
  }
  const ModelShard split = make_shard(c, 3, 8);
  EXPECT_EQ(split.experts, 128);
  EXPECT_EQ(split.expert0, 0);
  const ModelConfig llada2 = load(llada2_mini_config());  // 256 experts, a shared expert, a dense layer
  const ModelShard s = make_shard(llada2, 1, 4, true);
  EXPECT_EQ(s.experts, 64);
  EXPECT_EQ(s.expert0, 64);
  EXPECT_EQ(s.shared_intermediate, llada2.shared_expert_intermediate / 4);
  EXPECT_EQ(s.intermediate, llada2.intermediate / 4);
  expect_error([&] { make_shard(c, 0, 3, true); }, {"num_experts 128 is not a multiple of 3"});
  expect_error([&] { make_shard(load(sdar_4b_config()), 0, 2, true); }, {"has no mixture-of-experts layers to split"});
}

TEST(ModelShard, NamesWhatASizeDoesNotDivide) {
  const ModelConfig c = load(sdar_4b_config());
  expect_error([&] { make_shard(c, 0, 3); },
               {"num_attention_heads 32 is not a multiple of 3", "num_key_value_heads 8 is not a multiple of 3",
                "intermediate_size 9728 is not a multiple of 3"});
  EXPECT_THROW(make_shard(c, 2, 2), Error);
}
