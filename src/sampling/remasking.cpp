// The step schedule and the remasking strategies (docs/decoding.md §2, §4). Every strategy is
// "rank the masked positions by a key, take a prefix"; only the key and the prefix length differ.
#include "sampling/remasking.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"

namespace jet {

namespace {

// Indexed by the Strategy value.
constexpr std::array<std::string_view, 11> kStrategyNames = {
    "sequential",
    "anti_sequential",
    "random",
    "dilated",
    "low_confidence_static",
    "margin_static",
    "entropy_static",
    "low_confidence_dynamic",
    "dynamic_factor",
    "dynamic_pmax",
    "entropy_bounded",
};

int strategy_index(Strategy strategy) {
  const int i = static_cast<int>(strategy);
  JET_ASSERT(i >= 0 && i < static_cast<int>(kStrategyNames.size()), "strategy value ", i);
  return i;
}

// Index reversed in ceil(log2 B) bits: the dilated order visits indices by increasing value.
int bit_reversed(int index, int block_length) {
  const int bits = std::bit_width(static_cast<unsigned>(block_length - 1));
  int reversed = 0;
  for (int b = 0; b < bits; ++b) reversed |= ((index >> b) & 1) << (bits - 1 - b);
  return reversed;
}

// The ranking key of a position: smaller ranks first (ties: lower block index).
double strategy_key(Strategy strategy, const PositionScore& s, int block_length) {
  switch (strategy) {
    case Strategy::Sequential: return s.index;
    case Strategy::AntiSequential: return -s.index;
    case Strategy::Random: return -s.random;
    case Strategy::Dilated: return bit_reversed(s.index, block_length);
    case Strategy::MarginStatic: return -double{s.margin};
    case Strategy::EntropyStatic:
    case Strategy::EntropyBounded: return s.entropy;
    case Strategy::LowConfidenceStatic:
    case Strategy::LowConfidenceDynamic:
    case Strategy::DynamicFactor:
    case Strategy::DynamicPmax: return -double{s.confidence};
  }
  JET_ASSERT(false, "strategy value ", static_cast<int>(strategy));
  return 0;
}

// NaN scores (from NaN logits) rank last, so the sort below always sees a strict weak order.
double ranking_key(Strategy strategy, const PositionScore& s, int block_length) {
  const double key = strategy_key(strategy, s, block_length);
  return std::isnan(key) ? std::numeric_limits<double>::infinity() : key;
}

// How many of the ranked positions to commit; count = min(n, |m|).
int prefix_length(Strategy strategy, const std::vector<PositionScore>& ranked, int count, const SlotParams& p) {
  const int m = static_cast<int>(ranked.size());
  switch (strategy) {
    case Strategy::LowConfidenceDynamic: {
      int above = 0;  // ranked by confidence, so the ones above the threshold lead
      while (above < m && double{ranked[above].confidence} > double{p.dynamic_threshold}) ++above;
      return above >= count ? above : count;
    }
    case Strategy::DynamicFactor: {
      int k = 1;
      for (int i = 1; i <= m; ++i) {
        if ((i + 1) * (1.0 - ranked[i - 1].confidence) < p.dynamic_factor) k = i;
      }
      return k;
    }
    case Strategy::DynamicPmax: {
      int k = 0;
      for (double product = 1.0; k < m; ++k) {
        product *= ranked[k].confidence;
        if (product < p.dynamic_threshold) break;
      }
      return std::max(k, 1);
    }
    case Strategy::EntropyBounded: {
      int k = 0;
      for (double sum = 0.0; k < m; ++k) {
        sum += ranked[k].entropy;
        if (sum > p.eb_threshold) break;
      }
      return std::max(k, 1);
    }
    default: return count;
  }
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

bool is_dynamic(Strategy strategy) {
  return strategy == Strategy::LowConfidenceDynamic || strategy == Strategy::DynamicFactor ||
         strategy == Strategy::DynamicPmax || strategy == Strategy::EntropyBounded;
}

int scheduled_count(int block_length, int denoising_steps, int step) {
  JET_CHECK(denoising_steps >= 1 && denoising_steps <= block_length, "denoising_steps ", denoising_steps,
            " must be in [1, block_length = ", block_length, "]");
  JET_CHECK(step >= 0 && step < denoising_steps, "denoise step ", step, " is outside [0, denoising_steps = ",
            denoising_steps, ")");
  return block_length / denoising_steps + (step < block_length % denoising_steps ? 1 : 0);
}

std::vector<int> select_positions(Strategy strategy, const std::vector<PositionScore>& masked, int n,
                                  bool is_last, const SlotParams& params, int block_length) {
  strategy_index(strategy);  // rejects a corrupt value before any ranking
  std::vector<PositionScore> ranked = masked;
  int take = static_cast<int>(ranked.size());
  if (!is_last && !ranked.empty()) {
    std::sort(ranked.begin(), ranked.end(), [&](const PositionScore& a, const PositionScore& b) {
      const double ka = ranking_key(strategy, a, block_length), kb = ranking_key(strategy, b, block_length);
      return ka < kb || (ka == kb && a.index < b.index);
    });
    const int count = std::min(std::max(n, 0), take);
    take = prefix_length(strategy, ranked, count, params);
  }
  std::vector<int> chosen;
  for (int i = 0; i < take; ++i) chosen.push_back(ranked[i].index);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

}  // namespace jet
