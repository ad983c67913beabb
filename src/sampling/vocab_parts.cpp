// Sampling a row split by vocabulary (vocab_parts.h). A part holds its slice's distribution
// normalised on its own; with share_r = exp(log_mass_r - ln Σ_r exp(log_mass_r)), id i of slice r
// has probability share_r * p_r(i), the entropy is Σ_r share_r (H_r - ln share_r), and since
// ln p + g differs from the slice's own ln p_r + g by ln share_r for every id of the slice, the
// whole row's Gumbel-max winner is the best of the slices' winners so shifted.
#include "sampling/vocab_parts.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "sampling/kept_set.h"
#include "sampling/rng.h"
#include "sampling/row_stats.h"

namespace jet {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool uses_top_k(const SlotParams& p, int vocab) { return p.top_k > 0 && p.top_k < vocab; }

}  // namespace

bool needs_whole_rows(const SlotParams& params, int vocab) {
  if (params.temperature <= 0.0f) return false;
  return uses_top_k(params, vocab) ? params.top_k > kVocabPartCandidates : params.top_p < 1.0f;
}

VocabPart sample_vocab_part(float* logits, int n, int vocab0, int vocab, const SlotParams& params, const uint32_t* seen,
                            int32_t position, int32_t global_step) {
  JET_ASSERT(n >= 1 && vocab0 >= 0 && vocab0 + n <= vocab, "vocabulary slice [", vocab0, ", ", vocab0 + n, ") of ",
             vocab);
  VocabPart part{};
  if (params.mask_id >= vocab0 && params.mask_id < vocab0 + n) logits[params.mask_id - vocab0] = kNegInf;
  if (seen != nullptr && params.repetition_penalty != 1.0f) {
    apply_repetition_penalty(logits, n, vocab0, seen, params.repetition_penalty);
  }
  const int greedy = argmax_lowest_id(logits, n);
  part.greedy_id = static_cast<float>(vocab0 + greedy);
  part.greedy_logit = logits[greedy];
  if (!(logits[greedy] > kNegInf)) {  // a slice of the mask alone: nothing here can be sampled
    part.log_mass = kNegInf;
    return part;
  }
  const bool sampled = params.temperature > 0.0f;
  const SoftmaxStats stats = softmax_in_place(logits, n, sampled ? params.temperature : 1.0f);
  const float* probs = logits;
  const double log_mass = double{stats.max_scaled} + std::log(stats.sum);
  part.log_mass = static_cast<float>(log_mass);
  part.log_mass_low = static_cast<float>(log_mass - part.log_mass);
  part.entropy = static_cast<float>(stats.entropy);
  part.greedy_p = probs[greedy];
  part.top1_id = static_cast<float>(vocab0 + stats.top_id);
  part.top1_p = stats.p1;
  part.top2_p = stats.p2;
  if (!sampled) return part;
  if (uses_top_k(params, vocab)) {
    // The slice's top_k: the whole row's top_k lies among the slices' ones.
    const int count = std::min({params.top_k, n, kVocabPartCandidates});
    thread_local std::vector<int32_t> top;
    if (count < n) {
      select_kept_set(probs, n, count, 1.0f, top);
    } else {
      top.resize(n);
      std::iota(top.begin(), top.end(), 0);
      std::sort(top.begin(), top.end(), MoreProbable{probs});
    }
    part.candidates = static_cast<float>(count);
    for (int k = 0; k < count; ++k) {
      part.candidate_id[k] = static_cast<float>(vocab0 + top[k]);
      part.candidate_p[k] = probs[top[k]];
    }
    return part;
  }
  const uint64_t prefix =
      uniform_prefix(params.seed, static_cast<uint64_t>(position), static_cast<uint64_t>(global_step));
  double score = 0.0;
  const int32_t drawn = gumbel_max(probs, n, {}, stats.top_id, prefix, vocab0, &score);
  part.draw_id = static_cast<float>(vocab0 + drawn);
  part.draw_score = static_cast<float>(score);
  part.draw_score_low = static_cast<float>(score - part.draw_score);
  part.draw_p = probs[drawn];
  return part;
}

PositionSample combine_vocab_parts(const VocabPart* parts, int64_t stride, int num_parts, const SlotParams& params,
                                   int vocab, int32_t position, int32_t global_step) {
  JET_ASSERT(num_parts >= 1, "no vocabulary parts");
  const auto part = [&](int r) -> const VocabPart& { return parts[r * stride]; };
  float max_mass = kNegInf;
  for (int r = 0; r < num_parts; ++r) max_mass = std::max(max_mass, part(r).log_mass);
  PositionSample out;
  if (!(max_mass > kNegInf)) {  // every id masked: as the whole row, nothing can be drawn
    out.token = static_cast<int32_t>(part(0).greedy_id);
    out.logprob = std::log(1e-12f);
    return out;
  }
  const auto mass_of = [&](int r) { return double{part(r).log_mass} + part(r).log_mass_low; };
  double total = 0.0;
  for (int r = 0; r < num_parts; ++r) total += std::exp(mass_of(r) - max_mass);
  const double log_total = max_mass + std::log(total);
  std::vector<double> share(num_parts);
  double entropy = 0.0;
  float p1 = 0.0f, p2 = 0.0f;
  for (int r = 0; r < num_parts; ++r) {
    share[r] = std::exp(mass_of(r) - log_total);
    if (!(share[r] > 0.0)) continue;
    entropy += share[r] * (double{part(r).entropy} - std::log(share[r]));
    for (const float p :
         {static_cast<float>(part(r).top1_p * share[r]), static_cast<float>(part(r).top2_p * share[r])}) {
      if (p > p1) {
        p2 = p1;
        p1 = p;
      } else if (p > p2) {
        p2 = p;
      }
    }
  }
  out.entropy = static_cast<float>(entropy);
  out.margin = vocab > 1 ? p1 - p2 : 0.0f;

  if (params.temperature <= 0.0f) {
    int best = -1;  // the largest logit; a later slice wins only by a larger one (lowest id on ties)
    for (int r = 0; r < num_parts; ++r) {
      if (share[r] > 0.0 && (best < 0 || part(r).greedy_logit > part(best).greedy_logit)) best = r;
    }
    out.token = static_cast<int32_t>(part(best).greedy_id);
    out.confidence = static_cast<float>(part(best).greedy_p * share[best]);
  } else if (uses_top_k(params, vocab)) {
    struct Candidate {
      int32_t id;
      float p;
    };
    std::vector<Candidate> candidates;
    for (int r = 0; r < num_parts; ++r) {
      for (int k = 0; k < static_cast<int>(part(r).candidates); ++k) {
        candidates.push_back(
            {static_cast<int32_t>(part(r).candidate_id[k]), static_cast<float>(part(r).candidate_p[k] * share[r])});
      }
    }
    std::sort(candidates.begin(), candidates.end(),
              [](const Candidate& a, const Candidate& b) { return a.p > b.p || (a.p == b.p && a.id < b.id); });
    size_t kept = std::min(candidates.size(), static_cast<size_t>(params.top_k));
    if (params.top_p < 1.0f) {  // the shortest prefix whose mass, renormalised over the top_k, reaches top_p
      double mass = 0.0, cumulative = 0.0;
      for (size_t i = 0; i < kept; ++i) mass += candidates[i].p;
      for (size_t i = 0; i < kept; ++i) {
        cumulative += candidates[i].p;
        if (cumulative / mass >= params.top_p) {
          kept = i + 1;
          break;
        }
      }
    }
    const uint64_t prefix =
        uniform_prefix(params.seed, static_cast<uint64_t>(position), static_cast<uint64_t>(global_step));
    size_t best = 0;
    double best_score = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < kept; ++i) {
      if (!(candidates[i].p > 0.0f)) continue;
      const double score = std::log(double{candidates[i].p}) -
                           std::log(-std::log(uniform_lane(prefix, static_cast<uint64_t>(candidates[i].id))));
      if (score > best_score || (score == best_score && candidates[i].id < candidates[best].id)) {
        best = i;
        best_score = score;
      }
    }
    out.token = candidates[best].id;
    out.confidence = candidates[best].p;
  } else {
    int best = -1;
    double best_score = 0.0;
    for (int r = 0; r < num_parts; ++r) {
      if (!(share[r] > 0.0)) continue;
      const double score = double{part(r).draw_score} + part(r).draw_score_low + std::log(share[r]);
      if (best < 0 || score > best_score) {
        best = r;
        best_score = score;
      }
    }
    out.token = static_cast<int32_t>(part(best).draw_id);
    out.confidence = static_cast<float>(part(best).draw_p * share[best]);
  }
  out.logprob = std::log(std::max(out.confidence, 1e-12f));
  return out;
}

}  // namespace jet
