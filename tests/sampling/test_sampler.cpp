// sample_position (docs/decoding.md §3): crafted cases for each rule, sampling frequencies, and an
// independent float64 re-implementation of §3 that every parameter combination must agree with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "sampling/rng.h"
#include "sampling/sampler.h"

using namespace jet;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<uint32_t> bitmap(int V, const std::vector<int>& ids) {
  std::vector<uint32_t> words((V + 31) / 32, 0);
  for (int id : ids) words[id / 32] |= 1u << (id % 32);
  return words;
}

PositionSample sample(std::vector<float> logits, const SlotParams& p, const std::vector<uint32_t>* seen = nullptr,
                      int32_t position = 0, int32_t step = 0) {
  return sample_position(logits.data(), static_cast<int>(logits.size()), p, seen ? seen->data() : nullptr, position,
                         step);
}

SlotParams params(float temperature, int32_t mask_id) {
  SlotParams p;
  p.temperature = temperature;
  p.mask_id = mask_id;
  p.seed = 1234;
  return p;
}

// softmax of the row with -inf entries excluded, in float64.
std::vector<double> softmax(const std::vector<double>& l) {
  const double m = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  double z = 0.0;
  for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp(l[i] - m);
  for (double& x : p) x /= z;
  return p;
}

double entropy(const std::vector<double>& p) {
  double h = 0.0;
  for (double x : p) h -= x > 0 ? x * std::log(x) : 0.0;
  return h;
}

// §3 written out directly in float64 with full sorts, for comparison.
struct Reference {
  int token;
  double confidence, entropy, margin;
};

Reference reference_sample(const std::vector<float>& logits, const SlotParams& p, const std::vector<int>& seen_ids,
                           int32_t position, int32_t step) {
  const int V = static_cast<int>(logits.size());
  std::vector<double> l(logits.begin(), logits.end());
  l[p.mask_id] = -kInf;
  if (p.repetition_penalty != 1.0f) {
    for (int id : seen_ids) l[id] = l[id] > 0 ? l[id] / p.repetition_penalty : l[id] * p.repetition_penalty;
  }
  const bool greedy = p.temperature <= 0;
  std::vector<double> scaled = l;
  if (!greedy) {
    for (double& x : scaled) x /= p.temperature;
  }
  const std::vector<double> probs = softmax(scaled);
  std::vector<int> by_prob(V);
  std::iota(by_prob.begin(), by_prob.end(), 0);
  std::stable_sort(by_prob.begin(), by_prob.end(), [&](int a, int b) { return probs[a] > probs[b]; });
  Reference r{};
  if (greedy) {
    r.token = static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin());
  } else {
    std::vector<int> kept = by_prob;
    if (p.top_k > 0 && p.top_k < V) kept.resize(p.top_k);
    if (p.top_p < 1.0f) {
      double mass = 0.0, cumulative = 0.0;
      for (int id : kept) mass += probs[id];
      for (size_t k = 0; k < kept.size(); ++k) {
        cumulative += probs[kept[k]];
        if (cumulative / mass >= p.top_p) {
          kept.resize(k + 1);
          break;
        }
      }
    }
    std::sort(kept.begin(), kept.end());
    double best = -kInf;
    for (int id : kept) {
      const double score = std::log(probs[id]) - std::log(-std::log(uniform(p.seed, position, step, id)));
      if (score > best) {
        best = score;
        r.token = id;
      }
    }
  }
  r.confidence = probs[r.token];
  r.entropy = entropy(probs);
  r.margin = probs[by_prob[0]] - probs[by_prob[1]];
  return r;
}

}  // namespace

TEST(Sampler, GreedyTakesTheArgmaxLowestIdAndSoftmaxStatistics) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.0f, -2.0f};
  const PositionSample s = sample(logits, params(0.0f, 4));
  EXPECT_EQ(s.token, 1);
  const std::vector<double> p = softmax({1.0, 3.0, 3.0, 0.0, -kInf});
  EXPECT_NEAR(s.confidence, p[1], 1e-6);
  EXPECT_NEAR(s.logprob, std::log(p[1]), 1e-6);
  EXPECT_NEAR(s.entropy, entropy(p), 1e-6);
  EXPECT_NEAR(s.margin, 0.0, 1e-7);  // two equal maxima
}

TEST(Sampler, TemperatureSharpensTheDistribution) {
  const std::vector<float> logits = {0.5f, 1.5f, -0.25f, 1.0f, 9.0f};
  SlotParams p = params(0.5f, 4);
  p.top_k = 1;  // the top token, so the expected confidence is known
  const PositionSample s = sample(logits, p);
  const std::vector<double> probs = softmax({1.0, 3.0, -0.5, 2.0, -kInf});
  EXPECT_EQ(s.token, 1);
  EXPECT_NEAR(s.confidence, probs[1], 1e-6);
  EXPECT_NEAR(s.entropy, entropy(probs), 1e-6);
  EXPECT_NEAR(s.margin, probs[1] - probs[3], 1e-6);
}

TEST(Sampler, MaskTokenIsNeverChosenEvenWithTheLargestLogit) {
  const std::vector<float> logits = {0.1f, 0.3f, 50.0f, 0.2f};
  EXPECT_EQ(sample(logits, params(0.0f, 2)).token, 1);
  EXPECT_NEAR(sample(logits, params(0.0f, 2)).confidence, softmax({0.1, 0.3, -kInf, 0.2})[1], 1e-6);
  for (int step = 0; step < 300; ++step) EXPECT_NE(sample(logits, params(1.0f, 2), nullptr, 7, step).token, 2);
}

TEST(Sampler, TopKOneAndTinyTopPPickTheGreedyCandidate) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> logits(97);
    for (float& x : logits) x = normal(rng);
    const int greedy = sample(logits, params(0.0f, 96)).token;
    SlotParams top_k = params(1.3f, 96), top_p = params(1.3f, 96);
    top_k.top_k = 1;
    top_p.top_p = 1e-6f;
    EXPECT_EQ(sample(logits, top_k, nullptr, 3, trial).token, greedy);
    EXPECT_EQ(sample(logits, top_p, nullptr, 3, trial).token, greedy);
  }
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  const std::vector<float> logits = {2.0f, 1.0f, -1.0f, 0.5f, 0.0f};
  const std::vector<uint32_t> seen = bitmap(5, {0, 2});
  SlotParams p = params(0.0f, 4);
  p.repetition_penalty = 2.0f;
  const PositionSample s = sample(logits, p, &seen);
  // Penalised: {1, 1, -2, 0.5}: token 0 ties with 1 and wins on the lower id.
  const std::vector<double> probs = softmax({1.0, 1.0, -2.0, 0.5, -kInf});
  EXPECT_EQ(s.token, 0);
  EXPECT_NEAR(s.confidence, probs[0], 1e-6);
  EXPECT_NEAR(s.entropy, entropy(probs), 1e-6);
  // Penalty 1 leaves the seen ids alone.
  p.repetition_penalty = 1.0f;
  EXPECT_NEAR(sample(logits, p, &seen).confidence, softmax({2.0, 1.0, -1.0, 0.5, -kInf})[0], 1e-6);
}

TEST(Sampler, SeededDrawsFollowTheProbabilities) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  std::vector<float> logits;
  for (double x : probs) logits.push_back(static_cast<float>(std::log(x)));
  logits.push_back(5.0f);        // the mask
  constexpr int kDraws = 40000;  // frequency std <= 0.0025
  auto frequencies = [&](const SlotParams& p) {
    std::vector<double> f(5, 0.0);
    for (int step = 0; step < kDraws; ++step) f[sample(logits, p, nullptr, 11, step).token] += 1.0 / kDraws;
    return f;
  };
  const std::vector<double> all = frequencies(params(1.0f, 4));
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(all[i], probs[i], 0.012) << "token " << i;
  EXPECT_EQ(all[4], 0.0);
  // top-k 2 and top-p 0.6 keep {3, 2} (0.4 + 0.3 reaches 0.6): draws renormalised over them.
  SlotParams top_k = params(1.0f, 4), top_p = params(1.0f, 4);
  top_k.top_k = 2;
  top_p.top_p = 0.6f;
  for (const SlotParams& p : {top_k, top_p}) {
    const std::vector<double> f = frequencies(p);
    EXPECT_EQ(f[0] + f[1], 0.0);
    EXPECT_NEAR(f[2], 0.3 / 0.7, 0.012);
    EXPECT_NEAR(f[3], 0.4 / 0.7, 0.012);
  }
}

TEST(Sampler, KeptSetBreaksProbabilityTiesToTheLowerId) {
  // Ids 1, 2, 3 share the top probability; top-k 2 keeps {1, 2}, and a top-p reached by one of
  // them keeps {1}.
  const std::vector<float> logits = {0.0f, 2.0f, 2.0f, 2.0f, 0.5f, 0.0f};
  SlotParams top_k = params(1.0f, 5), top_p = params(1.0f, 5);
  top_k.top_k = 2;
  top_p.top_p = 0.2f;
  std::vector<int> drawn_k(6, 0), drawn_p(6, 0);
  for (int step = 0; step < 2000; ++step) {
    ++drawn_k[sample(logits, top_k, nullptr, 1, step).token];
    ++drawn_p[sample(logits, top_p, nullptr, 1, step).token];
  }
  EXPECT_EQ(drawn_k[0] + drawn_k[3] + drawn_k[4], 0);
  EXPECT_GT(drawn_k[1], 800);
  EXPECT_GT(drawn_k[2], 800);
  EXPECT_EQ(drawn_p[1], 2000);
}

TEST(Sampler, DrawsAreDeterministicPerSeedPositionAndStep) {
  std::mt19937 rng(9);
  const std::vector<float> logits = [&] {
    std::vector<float> v(64);
    for (float& x : v) x = std::uniform_real_distribution<float>(-1, 1)(rng);
    return v;
  }();
  SlotParams a = params(1.0f, 63), b = params(1.0f, 63);
  b.seed = a.seed + 1;
  int differ = 0;
  for (int step = 0; step < 100; ++step) {
    const PositionSample first = sample(logits, a, nullptr, 40, step);
    const PositionSample again = sample(logits, a, nullptr, 40, step);
    EXPECT_EQ(first.token, again.token);
    EXPECT_EQ(first.confidence, again.confidence);
    differ += first.token != sample(logits, b, nullptr, 40, step).token;
  }
  EXPECT_GT(differ, 50);  // 64 near-uniform tokens: another seed mostly draws another token
}

TEST(Sampler, AgreesWithTheFloat64ReferenceAcrossParameters) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  constexpr int V = 1000;  // top-p over the whole vocabulary needs more than the first 64 ids
  std::vector<int> seen_ids = {3, 100, 512, 999};
  const std::vector<uint32_t> seen = bitmap(V, seen_ids);
  int cases = 0;
  for (float temperature : {0.0f, 0.7f, 1.0f, 1.8f}) {
    for (int top_k : {0, 1, 5, 300}) {
      for (float top_p : {1.0f, 0.9f, 0.3f}) {
        for (float penalty : {1.0f, 1.3f}) {
          std::vector<float> logits(V);
          for (float& x : logits) x = normal(rng) * 0.4f;
          SlotParams p = params(temperature, 7);
          p.top_k = top_k;
          p.top_p = top_p;
          p.repetition_penalty = penalty;
          p.seed = static_cast<uint64_t>(cases) * 7919;
          for (int step = 0; step < 5; ++step) {
            const PositionSample s = sample(logits, p, &seen, 123, step);
            const Reference r = reference_sample(logits, p, seen_ids, 123, step);
            ASSERT_EQ(s.token, r.token) << "T " << temperature << " k " << top_k << " p " << top_p << " step " << step;
            EXPECT_NEAR(s.confidence, r.confidence, 1e-6 + 1e-5 * r.confidence);
            EXPECT_NEAR(s.logprob, std::log(r.confidence), 1e-5);
            EXPECT_NEAR(s.entropy, r.entropy, 1e-5 * (1 + r.entropy));
            EXPECT_NEAR(s.margin, r.margin, 1e-6);
          }
          ++cases;
        }
      }
    }
  }
}
