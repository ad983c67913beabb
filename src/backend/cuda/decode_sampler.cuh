// Sampling one masked block position on the GPU (docs/decoding.md §3): the device twin of
// src/sampling/sampler.cpp, computed by one thread block. The fp32 logits row is read, never
// copied or modified: one pass for the maximum, one for the softmax sums, the kept set's passes
// when top-k / top-p apply (kept_set_cut.cuh), one for the Gumbel-max draw. Probabilities are
// recomputed per pass with the CPU's fp32 formula; the Gumbel scores are float64 like the CPU's.
#pragma once

#include <cmath>
#include <cstdint>
#include <cub/block/block_reduce.cuh>

#include "backend/backend.h"
#include "backend/cuda/kept_set_cut.cuh"
#include "sampling/rng.h"

namespace jet::cuda {

constexpr int kSampleThreads = 512;

// What the commit kernel needs of a sampled position (sampler.h's PositionSample).
struct Candidate {
  int32_t token;
  float confidence;  // probs[token] of the unfiltered distribution
  float logprob;     // ln(max(confidence, 1e-12))
  float entropy;
  float margin;  // largest minus second largest probability
};

// The row as §3 turns it into a distribution: the mask id at -inf, the repetition penalty on
// the seen ids, divided by the temperature (1 when greedy); prob() gives the probability once
// the passes have found max_scaled and inv_sum.
struct SampledRow {
  // Logits each thread loads before using the first: one load at a time per thread leaves the
  // memory system mostly idle (the passes are bound by reading the row).
  static constexpr int kLoadsInFlight = 8;

  const float* logits;
  const uint32_t* seen;  // the repetition-penalty bitmap, or null when the penalty is 1
  int32_t mask_id;
  float penalty;
  float temperature;
  float max_scaled = 0.0f;  // the largest logit / temperature
  float inv_sum = 0.0f;     // 1 / sum of exp(z)

  __device__ float logit(int32_t id) const {
    float l = id == mask_id ? -INFINITY : __ldg(logits + id);
    if (seen != nullptr && ((__ldg(seen + (id >> 5)) >> (id & 31)) & 1u)) l = l > 0 ? l / penalty : l * penalty;
    return l;
  }
  // l / T, the CPU's fp32 division (exact, so T = 1 needs none).
  __device__ float scaled(float l) const { return temperature == 1.0f ? l : l / temperature; }
  __device__ float z(float l) const { return scaled(l) - max_scaled; }
  __device__ float prob(float l) const { return expf(z(l)) * inv_sum; }
  __device__ float operator()(int32_t id) const { return prob(logit(id)); }

  // f(id, logit) for this thread's ids (threadIdx.x + k * kSampleThreads), in increasing order.
  template <typename F>
  __device__ void for_each_logit(int V, F&& f) const {
    int32_t id = threadIdx.x;
    for (; id + (kLoadsInFlight - 1) * kSampleThreads < V; id += kLoadsInFlight * kSampleThreads) {
      float l[kLoadsInFlight];
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) l[k] = logit(id + k * kSampleThreads);
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) f(id + k * kSampleThreads, l[k]);
    }
    for (; id < V; id += kSampleThreads) f(id, logit(id));
  }
  // f(id, probability) for this thread's ids, in increasing order.
  template <typename F>
  __device__ void for_each_prob(int V, F&& f) const {
    for_each_logit(V, [&](int32_t id, float l) { f(id, prob(l)); });
  }
};

struct ArgMax {
  float value;
  int32_t id;
};

// The larger value, the lower id on ties (sampler.cpp's argmax_lowest_id; NaN never wins).
struct ArgMaxOp {
  __device__ ArgMax operator()(const ArgMax& a, const ArgMax& b) const {
    return b.value > a.value || (b.value == a.value && b.id < a.id) ? b : a;
  }
};

// Softmax sums in double as on the CPU, and the two largest exponentials (with multiplicity),
// whose products with inv_sum are the two largest probabilities.
struct SoftmaxSums {
  double sum;
  double weighted_z;  // sum of e * z over e > 0: entropy = ln(sum) - weighted_z / sum
  float e1, e2;
};

struct AddSoftmaxSums {
  __device__ SoftmaxSums operator()(const SoftmaxSums& a, const SoftmaxSums& b) const {
    return {a.sum + b.sum, a.weighted_z + b.weighted_z, fmaxf(a.e1, b.e1),
            fmaxf(fminf(a.e1, b.e1), fmaxf(a.e2, b.e2))};
  }
};

struct Scored {
  double score;
  int32_t id;
};

// The higher Gumbel score, the lower id on ties.
struct ScoredMaxOp {
  __device__ Scored operator()(const Scored& a, const Scored& b) const {
    return b.score > a.score || (b.score == a.score && b.id < a.id) ? b : a;
  }
};

struct SamplerShared {
  union {
    cub::BlockReduce<ArgMax, kSampleThreads>::TempStorage argmax;
    cub::BlockReduce<SoftmaxSums, kSampleThreads>::TempStorage sums;
    cub::BlockReduce<Scored, kSampleThreads>::TempStorage scored;
  } reduce;
  ArgMax argmax;
  SoftmaxSums sums;
  Scored scored;
  KeptSetShared<kSampleThreads> kept;
};

// A block-wide reduction whose result every thread gets; `result` is its shared broadcast slot.
template <typename T, typename Op, typename TempStorage>
__device__ T reduce_to_all(T partial, Op op, TempStorage& temp, T& result) {
  const T total = cub::BlockReduce<T, kSampleThreads>(temp).Reduce(partial, op);
  if (threadIdx.x == 0) result = total;
  __syncthreads();
  const T all = result;
  __syncthreads();  // temp and result are free for the next reduction
  return all;
}

// argmax over the kept ids (order key >= cut) of ln(p_i) + g_i, g_i = -ln(-ln(u_i)), in float64,
// lowest id on ties. Most ids need no logarithm: id i beats score b only if u_i > exp(-p_i e^-b)
// >= 1 - p_i e^-b, so an id whose draw falls below 1 - p_i e^-b (minus a margin far above the
// rounding of the logs) cannot be its thread's best, let alone the block's. `fallback` is the
// answer when no id has a positive probability (NaN rows).
__device__ inline int32_t gumbel_max(const SampledRow& row, int V, uint64_t cut, uint64_t rng_prefix, int32_t fallback,
                                     SamplerShared& sm) {
  constexpr double kSkipMargin = 1e-12;
  Scored best{-INFINITY, INT32_MAX};
  double win_scale = INFINITY;  // e^-best.score
  row.for_each_prob(V, [&](int32_t id, float prob) {
    if (!(prob > 0.0f) || order_key(prob, id) < cut) return;
    const double u = uniform_lane(rng_prefix, static_cast<uint64_t>(id));
    if (u < 1.0 - static_cast<double>(prob) * win_scale - kSkipMargin) return;
    const double score = log(static_cast<double>(prob)) - log(-log(u));
    if (score > best.score || (score == best.score && id < best.id)) {
      best = {score, id};
      win_scale = exp(-score);
    }
  });
  const Scored winner = reduce_to_all(best, ScoredMaxOp{}, sm.reduce.scored, sm.scored);
  return winner.id == INT32_MAX ? fallback : winner.id;
}

// Samples one masked position (sampler.cpp's sample_position); every thread of the block calls
// it and gets the result. `seen` is null when the slot's penalty is 1.
__device__ inline Candidate sample_position(const float* logits, int V, const SlotParams& p, const uint32_t* seen,
                                            int32_t position, int32_t global_step, SamplerShared& sm) {
  const bool greedy = p.temperature <= 0.0f;
  SampledRow row{logits, seen, p.mask_id, p.repetition_penalty, greedy ? 1.0f : p.temperature};

  // The largest logit, lowest id on ties: the greedy token and the softmax shift.
  ArgMax local_max{-INFINITY, V};
  row.for_each_logit(V, [&](int32_t id, float l) { local_max = ArgMaxOp{}(local_max, {l, id}); });
  ArgMax top = reduce_to_all(local_max, ArgMaxOp{}, sm.reduce.argmax, sm.argmax);
  if (top.id >= V) top.id = 0;  // an all-NaN row: the CPU's argmax stays at id 0 too
  row.max_scaled = row.scaled(row.logit(top.id));

  SoftmaxSums local_sums{0.0, 0.0, 0.0f, 0.0f};
  row.for_each_logit(V, [&](int32_t, float l) {
    const float z = row.z(l);
    const float e = expf(z);
    local_sums.sum += e;
    if (e > 0.0f) local_sums.weighted_z += static_cast<double>(e) * z;  // skips -inf (masked) entries
    if (e > local_sums.e1) {
      local_sums.e2 = local_sums.e1;
      local_sums.e1 = e;
    } else if (e > local_sums.e2) {
      local_sums.e2 = e;
    }
  });
  const SoftmaxSums sums = reduce_to_all(local_sums, AddSoftmaxSums{}, sm.reduce.sums, sm.sums);
  row.inv_sum = static_cast<float>(1.0 / sums.sum);
  Candidate c;
  c.entropy = static_cast<float>(log(sums.sum) - sums.weighted_z / sums.sum);
  c.margin = V > 1 ? sums.e1 * row.inv_sum - sums.e2 * row.inv_sum : 0.0f;

  if (greedy) {
    c.token = top.id;  // the argmax of the logits: probabilities can tie where logits do not
  } else {
    const uint64_t cut = kept_set_cut(row, V, p.top_k, p.top_p, sm.kept);
    const uint64_t rng_prefix =
        uniform_prefix(p.seed, static_cast<uint64_t>(position), static_cast<uint64_t>(global_step));
    c.token = gumbel_max(row, V, cut, rng_prefix, top.id, sm);
  }
  c.confidence = row(c.token);
  c.logprob = logf(c.confidence < 1e-12f ? 1e-12f : c.confidence);
  return c;
}

}  // namespace jet::cuda
