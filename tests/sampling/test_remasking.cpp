// The step schedule, the 11 remasking strategies on crafted scores and the exploration modifiers
// that replace a step's strategy (docs/decoding.md §2, §4).
#include <gtest/gtest.h>

#include <string>

#include "sampling/remasking.h"
#include "sampling/remasking_rules.h"
#include "sampling/rng.h"

using namespace jet;

namespace {

// Masked positions 0..c.size()-1 with the given confidences; entropy 1 - c and margin c so that
// every ranking agrees on which positions are "good".
std::vector<PositionScore> with_confidence(const std::vector<float>& c) {
  std::vector<PositionScore> m;
  for (size_t j = 0; j < c.size(); ++j) m.push_back({static_cast<int>(j), c[j], 1.0f - c[j], c[j], 0.0});
  return m;
}

std::vector<PositionScore> at_indices(const std::vector<int>& indices) {
  std::vector<PositionScore> m;
  for (int j : indices) m.push_back({j, 0.5f, 0.5f, 0.5f, 0.5});
  return m;
}

std::vector<int> select(Strategy s, const std::vector<PositionScore>& m, int n, const SlotParams& p = {}, int B = 8,
                        bool is_last = false) {
  return select_positions(s, m, n, is_last, p, B);
}

using Indices = std::vector<int>;

constexpr Strategy kAll[] = {
    Strategy::Sequential,          Strategy::AntiSequential, Strategy::Random,         Strategy::Dilated,
    Strategy::LowConfidenceStatic, Strategy::MarginStatic,   Strategy::EntropyStatic,  Strategy::LowConfidenceDynamic,
    Strategy::DynamicFactor,       Strategy::DynamicPmax,    Strategy::EntropyBounded,
};

}  // namespace

TEST(Schedule, SplitsTheBlockOverTheSteps) {
  for (int s = 0; s < 4; ++s) EXPECT_EQ(scheduled_count(4, 4, s), 1);
  EXPECT_EQ(scheduled_count(5, 2, 0), 3);
  EXPECT_EQ(scheduled_count(5, 2, 1), 2);
  EXPECT_EQ(scheduled_count(8, 3, 0), 3);
  EXPECT_EQ(scheduled_count(8, 3, 1), 3);
  EXPECT_EQ(scheduled_count(8, 3, 2), 2);
  EXPECT_EQ(scheduled_count(4, 1, 0), 4);
}

TEST(Schedule, RejectsStepCountsOutsideOneToBlockLength) {
  EXPECT_THROW(scheduled_count(4, 0, 0), Error);
  EXPECT_THROW(scheduled_count(4, 5, 0), Error);
  EXPECT_THROW(scheduled_count(4, 2, 2), Error);
  try {
    scheduled_count(4, 5, 0);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("denoising_steps 5"), std::string::npos) << e.what();
  }
}

TEST(StrategyNames, RoundTripAndUnknownNameListsAll) {
  for (Strategy s : kAll) EXPECT_EQ(parse_strategy(strategy_name(s)), s);
  EXPECT_EQ(parse_strategy("low_confidence_dynamic"), Strategy::LowConfidenceDynamic);
  try {
    parse_strategy("most_confident");
    FAIL() << "no error for an unknown strategy";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'most_confident'"), std::string::npos) << message;
    for (Strategy s : kAll) EXPECT_NE(message.find(std::string(strategy_name(s))), std::string::npos) << message;
  }
}

TEST(Strategies, SequentialAndAntiSequential) {
  const auto m = at_indices({1, 3, 4, 6});
  EXPECT_EQ(select(Strategy::Sequential, m, 2), (Indices{1, 3}));
  EXPECT_EQ(select(Strategy::AntiSequential, m, 2), (Indices{4, 6}));
  EXPECT_EQ(select(Strategy::Sequential, m, 9), (Indices{1, 3, 4, 6}));  // clipped to |m|
}

TEST(Strategies, RandomTakesTheLargestDrawsTiesToLowerIndex) {
  std::vector<PositionScore> m = at_indices({0, 1, 2, 3});
  m[0].random = 0.2;
  m[1].random = 0.9;
  m[2].random = 0.4;
  m[3].random = 0.9;
  EXPECT_EQ(select(Strategy::Random, m, 1), (Indices{1}));
  EXPECT_EQ(select(Strategy::Random, m, 3), (Indices{1, 2, 3}));
}

TEST(Strategies, DilatedFollowsBitReversalOrder) {
  // One commit per step reveals the order.
  for (auto [B, order] : {std::pair{4, Indices{0, 2, 1, 3}}, std::pair{8, Indices{0, 4, 2, 6, 1, 5, 3, 7}},
                          std::pair{5, Indices{0, 4, 2, 1, 3}}}) {
    Indices left;
    for (int j = 0; j < B; ++j) left.push_back(j);
    Indices visited;
    while (!left.empty()) {
      const Indices chosen = select(Strategy::Dilated, at_indices(left), 1, {}, B);
      ASSERT_EQ(chosen.size(), 1u);
      visited.push_back(chosen[0]);
      std::erase(left, chosen[0]);
    }
    EXPECT_EQ(visited, order) << "B = " << B;
  }
}

TEST(Strategies, StaticRankingsTieToLowerIndex) {
  std::vector<PositionScore> m = at_indices({0, 1, 2, 3});
  const float c[] = {0.3f, 0.8f, 0.8f, 0.1f}, margin[] = {0.5f, 0.2f, 0.6f, 0.6f}, entropy[] = {0.4f, 0.1f, 0.9f, 0.1f};
  for (int j = 0; j < 4; ++j) {
    m[j].confidence = c[j];
    m[j].margin = margin[j];
    m[j].entropy = entropy[j];
  }
  EXPECT_EQ(select(Strategy::LowConfidenceStatic, m, 1), (Indices{1}));
  EXPECT_EQ(select(Strategy::LowConfidenceStatic, m, 3), (Indices{0, 1, 2}));
  EXPECT_EQ(select(Strategy::MarginStatic, m, 1), (Indices{2}));
  EXPECT_EQ(select(Strategy::MarginStatic, m, 3), (Indices{0, 2, 3}));
  EXPECT_EQ(select(Strategy::EntropyStatic, m, 1), (Indices{1}));
  EXPECT_EQ(select(Strategy::EntropyStatic, m, 3), (Indices{0, 1, 3}));
}

TEST(Strategies, LowConfidenceDynamic) {
  const auto m = with_confidence({0.95f, 0.2f, 0.91f, 0.5f});
  EXPECT_EQ(select(Strategy::LowConfidenceDynamic, m, 1), (Indices{0, 2}));
  // Fewer than n above the threshold: the n most confident.
  EXPECT_EQ(select(Strategy::LowConfidenceDynamic, m, 3), (Indices{0, 2, 3}));
  // The threshold is strict: 0.91 is not above 0.91.
  SlotParams p;
  p.dynamic_threshold = 0.91f;
  EXPECT_EQ(select(Strategy::LowConfidenceDynamic, m, 1, p), (Indices{0}));
  EXPECT_EQ(select(Strategy::LowConfidenceDynamic, with_confidence({0.3f, 0.4f}), 1), (Indices{1}));
}

TEST(Strategies, DynamicFactor) {
  // Sorted c: 0.99, 0.9, 0.8, 0.5: (k+1)(1-c_k) = 0.02, 0.3, 0.8, 2.5.
  const auto m = with_confidence({0.5f, 0.99f, 0.8f, 0.9f});
  SlotParams p;
  p.dynamic_factor = 1.0f;
  EXPECT_EQ(select(Strategy::DynamicFactor, m, 1, p), (Indices{1, 2, 3}));
  p.dynamic_factor = 0.5f;
  EXPECT_EQ(select(Strategy::DynamicFactor, m, 1, p), (Indices{1, 3}));
  p.dynamic_factor = 0.01f;  // no k qualifies: at least 1
  EXPECT_EQ(select(Strategy::DynamicFactor, m, 3, p), (Indices{1}));
}

TEST(Strategies, DynamicPmax) {
  const auto m = with_confidence({0.9f, 0.99f, 0.5f, 0.95f});
  SlotParams p;
  p.dynamic_threshold = 0.9f;  // products 0.99, 0.9405, 0.846...
  EXPECT_EQ(select(Strategy::DynamicPmax, m, 1, p), (Indices{1, 3}));
  p.dynamic_threshold = 0.995f;  // even the first falls short: at least 1
  EXPECT_EQ(select(Strategy::DynamicPmax, m, 2, p), (Indices{1}));
}

TEST(Strategies, EntropyBounded) {
  std::vector<PositionScore> m = at_indices({0, 1, 2, 3});
  const float h[] = {0.3f, 0.05f, 1.0f, 0.1f};  // ascending: 0.05, 0.1, 0.3 -> sums 0.05, 0.15, 0.45
  for (int j = 0; j < 4; ++j) m[j].entropy = h[j];
  SlotParams p;
  p.eb_threshold = 0.35f;
  EXPECT_EQ(select(Strategy::EntropyBounded, m, 1, p), (Indices{1, 3}));
  p.eb_threshold = 0.01f;
  EXPECT_EQ(select(Strategy::EntropyBounded, m, 2, p), (Indices{1}));
}

TEST(Strategies, LastStepCommitsEverythingAndEmptyCommitsNothing) {
  const auto m = with_confidence({0.1f, 0.2f, 0.3f});
  for (Strategy s : kAll) {
    EXPECT_EQ(select(s, m, 1, {}, 8, /*is_last=*/true), (Indices{0, 1, 2})) << strategy_name(s);
    EXPECT_TRUE(select(s, {}, 2).empty()) << strategy_name(s);
  }
}

TEST(Strategies, DynamicOnesCommitAtLeastOneStaticOnesExactlyN) {
  const auto m = with_confidence({0.01f, 0.02f, 0.03f, 0.04f});  // nothing confident
  for (Strategy s : kAll) {
    // low_confidence_dynamic falls back to the n most confident; the other dynamic ones to one.
    const bool at_least_one =
        s == Strategy::DynamicFactor || s == Strategy::DynamicPmax || s == Strategy::EntropyBounded;
    const size_t expected = at_least_one ? 1u : 2u;
    EXPECT_EQ(select(s, m, 2).size(), expected) << strategy_name(s);
  }
}

TEST(Exploration, OffLeavesTheRequestsStrategy) {
  SlotParams p;
  p.strategy = Strategy::EntropyBounded;
  for (int32_t position0 : {0, 4, 1000}) {
    for (int32_t step : {0, 7}) EXPECT_EQ(step_strategy(p, StepRow{0, position0, step}), Strategy::EntropyBounded);
  }
}

TEST(Exploration, BarrierMakesEarlyBlocksSequentialBeforeEpsilonIsDrawn) {
  SlotParams p;
  p.strategy = Strategy::LowConfidenceStatic;
  p.sequential_below = 20;
  p.epsilon_greedy = 1.0f;  // every step past the barrier is random
  EXPECT_EQ(step_strategy(p, StepRow{0, 0, 3}), Strategy::Sequential);
  EXPECT_EQ(step_strategy(p, StepRow{0, 19, 3}), Strategy::Sequential);
  EXPECT_EQ(step_strategy(p, StepRow{0, 20, 3}), Strategy::Random);
  p.epsilon_greedy = 0.0f;
  EXPECT_EQ(step_strategy(p, StepRow{0, 20, 3}), Strategy::LowConfidenceStatic);
}

TEST(Exploration, EpsilonIsOneSeededDrawPerBlockAndStep) {
  SlotParams p;
  p.strategy = Strategy::Dilated;
  p.epsilon_greedy = 0.25f;
  p.seed = 77;
  int random_steps = 0, total = 0;
  for (int32_t position0 = 0; position0 < 400; position0 += 4) {
    for (int32_t step = 0; step < 40; ++step, ++total) {
      const Strategy s = step_strategy(p, StepRow{3, position0, step});
      const bool drawn = uniform(p.seed, position0, step, kEpsilonGreedyLane) < 0.25;
      EXPECT_EQ(s, drawn ? Strategy::Random : Strategy::Dilated) << position0 << " " << step;
      EXPECT_EQ(step_strategy(p, StepRow{9, position0, step}), s);  // the slot and other fields do not matter
      random_steps += s == Strategy::Random;
    }
  }
  // 4,000 independent draws: within 5 standard deviations (0.034) of the chance.
  EXPECT_NEAR(static_cast<double>(random_steps) / total, 0.25, 0.034);
  p.seed = 78;  // another seed, other draws
  int differ = 0;
  for (int32_t step = 0; step < 200; ++step) {
    differ += (step_strategy(p, StepRow{0, 0, step}) == Strategy::Random) !=
              (uniform(77, 0, step, kEpsilonGreedyLane) < 0.25);
  }
  EXPECT_GT(differ, 0);
}
