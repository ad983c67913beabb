// The step schedule and the remasking strategies (docs/decoding.md §2, §4): names, and the
// selection built on the rules shared with the CUDA kernels (remasking_rules.h).
#include "sampling/remasking.h"

#include <algorithm>
#include <array>
#include <string>

#include "core/error.h"
#include "sampling/remasking_rules.h"

namespace jet {

namespace {

// Indexed by the Strategy value.
constexpr std::array<std::string_view, 11> kStrategyNames = {
    "sequential",     "anti_sequential",        "random",
    "dilated",        "low_confidence_static",  "margin_static",
    "entropy_static", "low_confidence_dynamic", "dynamic_factor",
    "dynamic_pmax",   "entropy_bounded",
};

int strategy_index(Strategy strategy) {
  const int i = static_cast<int>(strategy);
  JET_ASSERT(i >= 0 && i < static_cast<int>(kStrategyNames.size()), "strategy value ", i);
  return i;
}

}  // namespace

Strategy parse_strategy(std::string_view name) {
  for (size_t i = 0; i < kStrategyNames.size(); ++i) {
    if (kStrategyNames[i] == name) return static_cast<Strategy>(i);
  }
  std::string known;
  for (std::string_view n : kStrategyNames) known += str(known.empty() ? "" : ", ", n);
  throw Error(str("unknown remasking strategy '", name, "' (expected one of: ", known, ")"));
}

std::string_view strategy_name(Strategy strategy) { return kStrategyNames[strategy_index(strategy)]; }

int scheduled_count(int block_length, int denoising_steps, int step) {
  JET_CHECK(denoising_steps >= 1 && denoising_steps <= block_length, "denoising_steps ", denoising_steps,
            " must be in [1, block_length = ", block_length, "]");
  JET_CHECK(step >= 0 && step < denoising_steps, "denoise step ", step,
            " is outside [0, denoising_steps = ", denoising_steps, ")");
  return block_length / denoising_steps + (step < block_length % denoising_steps ? 1 : 0);
}

std::vector<int> select_positions(Strategy strategy, const std::vector<PositionScore>& masked, int n, bool is_last,
                                  const SlotParams& params, int block_length) {
  strategy_index(strategy);  // rejects a corrupt value before any ranking
  std::vector<PositionScore> ranked = masked;
  int take = static_cast<int>(ranked.size());
  if (!is_last && !ranked.empty()) {
    auto key = [&](const PositionScore& s) {
      return ranking_key(strategy, s.index, s.confidence, s.entropy, s.margin, s.random, block_length);
    };
    std::sort(ranked.begin(), ranked.end(), [&](const PositionScore& a, const PositionScore& b) {
      const double ka = key(a), kb = key(b);
      return ka < kb || (ka == kb && a.index < b.index);
    });
    std::vector<float> confidence, entropy;
    for (const PositionScore& s : ranked) {
      confidence.push_back(s.confidence);
      entropy.push_back(s.entropy);
    }
    const int count = std::min(std::max(n, 0), take);
    take = prefix_length(strategy, confidence.data(), entropy.data(), take, count, params);
  }
  std::vector<int> chosen;
  for (int i = 0; i < take; ++i) chosen.push_back(ranked[i].index);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

}  // namespace jet
