// Sampling a row split by vocabulary (sampling/vocab_parts.h) against sample_position on the whole
// row: the same token and, to rounding, the same confidence, log-probability, entropy and margin,
// for greedy, plain temperature and top-k (with and without top-p) draws, under a mask id and a
// repetition penalty, with the row cut into 1 to 7 slices of unequal widths, slices of one id and
// a slice holding only the mask; and which settings need whole rows.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sampling/sampler.h"
#include "sampling/vocab_parts.h"

using namespace jet;

namespace {

// The sample from the row cut at `cuts` (slice r: ids [cuts[r], cuts[r + 1])).
PositionSample split_sample(const std::vector<float>& row, const std::vector<int>& cuts, const SlotParams& p,
                            const uint32_t* seen, int32_t position, int32_t step) {
  const int V = static_cast<int>(row.size());
  std::vector<VocabPart> parts;
  for (size_t r = 0; r + 1 < cuts.size(); ++r) {
    std::vector<float> slice(row.begin() + cuts[r], row.begin() + cuts[r + 1]);
    parts.push_back(
        sample_vocab_part(slice.data(), static_cast<int>(slice.size()), cuts[r], V, p, seen, position, step));
  }
  return combine_vocab_parts(parts.data(), 1, static_cast<int>(parts.size()), p, V, position, step);
}

std::vector<int> random_cuts(std::mt19937& rng, int V, int slices) {
  std::vector<int> cuts = {0, V};
  while (static_cast<int>(cuts.size()) < slices + 1) {
    const int c = std::uniform_int_distribution<int>(1, V - 1)(rng);
    if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
  }
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

}  // namespace

TEST(VocabParts, SplitRowsSampleWhatTheWholeRowDoes) {
  std::mt19937 rng(11);
  struct Setting {
    float temperature, top_p;
    int top_k;
    float penalty;
  };
  int checked = 0;
  for (const Setting s : {Setting{0.0f, 1.0f, 0, 1.0f}, Setting{1.0f, 1.0f, 0, 1.0f}, Setting{0.7f, 1.0f, 0, 1.3f},
                          Setting{1.0f, 1.0f, 5, 1.0f}, Setting{0.8f, 0.9f, 20, 1.0f}, Setting{1.2f, 0.5f, 64, 1.2f},
                          Setting{1.0f, 1.0f, 1, 1.0f}, Setting{0.0f, 0.9f, 20, 1.5f}}) {
    for (int V : {7, 50, 1000}) {
      for (int trial = 0; trial < 40; ++trial) {
        std::vector<float> row(V);
        const float spread = trial % 2 ? 8.0f : 1.0f;  // peaked and flat rows
        for (float& l : row) l = std::normal_distribution<float>(0.0f, spread)(rng);
        SlotParams p;
        p.temperature = s.temperature;
        p.top_p = s.top_p;
        p.top_k = s.top_k;
        p.repetition_penalty = s.penalty;
        p.mask_id = std::uniform_int_distribution<int>(0, V - 1)(rng);
        p.seed = 1000 + trial;
        if (needs_whole_rows(p, V)) continue;  // top_p over all ids: those rows are gathered whole
        std::vector<uint32_t> seen((V + 31) / 32, 0);
        for (int i = 0; i < V; i += 3) seen[i / 32] |= 1u << (i % 32);
        const int32_t position = 17 + trial, step = trial % 5;
        std::vector<float> whole_row = row;
        const PositionSample whole = sample_position(whole_row.data(), V, p, seen.data(), position, step);
        for (int slices : {1, 2, 3, 7}) {
          if (slices > V) continue;
          std::vector<std::vector<int>> cut_sets = {random_cuts(rng, V, slices)};
          if (slices == 3) cut_sets.push_back({0, p.mask_id, p.mask_id + 1, V});  // a slice of the mask alone
          for (const std::vector<int>& cuts : cut_sets) {
            if (std::adjacent_find(cuts.begin(), cuts.end()) != cuts.end()) continue;  // an empty slice
            SCOPED_TRACE(testing::Message() << "T " << s.temperature << " top_k " << s.top_k << " top_p " << s.top_p
                                            << " V " << V << " trial " << trial << " slices " << cuts.size() - 1);
            const PositionSample split = split_sample(row, cuts, p, seen.data(), position, step);
            EXPECT_EQ(split.token, whole.token);
            EXPECT_NEAR(split.confidence, whole.confidence, 1e-6 + 1e-5 * whole.confidence);
            EXPECT_NEAR(split.logprob, whole.logprob, 1e-5);
            EXPECT_NEAR(split.entropy, whole.entropy, 1e-5);
            EXPECT_NEAR(split.margin, whole.margin, 1e-6);
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 2500);
}

TEST(VocabParts, WholeRowsOnlyForTopPBeyondTheCandidates) {
  SlotParams p;
  p.temperature = 0.0f;
  p.top_p = 0.9f;
  EXPECT_FALSE(needs_whole_rows(p, 1000));  // greedy ignores top_p
  p.temperature = 1.0f;
  EXPECT_TRUE(needs_whole_rows(p, 1000));
  p.top_k = 20;
  EXPECT_FALSE(needs_whole_rows(p, 1000));
  p.top_k = kVocabPartCandidates + 1;
  EXPECT_TRUE(needs_whole_rows(p, 1000));
  p.top_p = 1.0f;
  EXPECT_TRUE(needs_whole_rows(p, 1000));                       // a top_k larger than the parts carry
  EXPECT_FALSE(needs_whole_rows(p, kVocabPartCandidates + 1));  // ... unless it is every id: no top_k
  p.top_k = 0;
  EXPECT_FALSE(needs_whole_rows(p, 1000));
}
