// Sampling one masked block position on the GPU (docs/decoding.md §3): the device twin of
// src/sampling/sampler.cpp, computed by one thread block; and a tensor-parallel rank's part of
// one (the twin of sampling/vocab_parts.cpp's sample_vocab_part). The fp32 logits row is read, never
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
#include "sampling/vocab_parts.h"

namespace jet::cuda {

constexpr int kSampleThreads = 512;

// The row as §3 turns it into a distribution: the mask id at -inf, the repetition penalty on
// the seen ids, divided by the temperature (1 when greedy); prob() gives the probability once
// the passes have found max_scaled and inv_sum.
struct SampledRow {
  // Logits each thread loads before using the first: one load at a time per thread leaves the
  // memory system mostly idle (the passes are bound by reading the row). Rows that allow it are
  // read 4 logits (16 bytes) per load, kQuadsInFlight at a time: twice the bytes in flight.
  static constexpr int kLoadsInFlight = 8;
  static constexpr int kQuadsInFlight = 4;

  const float* logits;
  const uint32_t* seen;  // the repetition-penalty bitmap, or null when the penalty is 1
  int32_t mask_id;
  float penalty;
  float temperature;
  float max_scaled = 0.0f;  // the largest logit / temperature
  float inv_sum = 0.0f;     // 1 / sum of exp(z)
  int32_t id0 = 0;          // the vocabulary id of logits[0] (a tensor-parallel rank's slice starts there)

  // The raw logit of row index `id` as §3 adjusts it: the mask id at -inf, the penalty on seen
  // ids (mask_id and seen are the whole vocabulary's).
  __device__ float adjusted(int32_t id, float raw) const {
    const int32_t vocab_id = id0 + id;
    float l = vocab_id == mask_id ? -INFINITY : raw;
    if (seen != nullptr && ((__ldg(seen + (vocab_id >> 5)) >> (vocab_id & 31)) & 1u)) {
      l = l > 0 ? l / penalty : l * penalty;
    }
    return l;
  }
  __device__ float logit(int32_t id) const { return adjusted(id, __ldg(logits + id)); }
  // l / T, the CPU's fp32 division (exact, so T = 1 needs none).
  __device__ float scaled(float l) const { return temperature == 1.0f ? l : l / temperature; }
  __device__ float z(float l) const { return scaled(l) - max_scaled; }
  __device__ float prob(float l) const { return expf(z(l)) * inv_sum; }
  __device__ float operator()(int32_t id) const { return prob(logit(id)); }

  // f(id, logit) for this thread's ids, in increasing order: ids 4j ... 4j + 3 for
  // j = threadIdx.x + k * kSampleThreads when the row is read in 16-byte loads, else ids
  // threadIdx.x + k * kSampleThreads.
  template <typename F>
  __device__ void for_each_logit(int V, F&& f) const {
    if (V % 4 == 0 && reinterpret_cast<uintptr_t>(logits) % 16 == 0) {
      const auto* quads = reinterpret_cast<const float4*>(logits);
      const int num_quads = V / 4;
      int32_t q = threadIdx.x;
      for (; q + (kQuadsInFlight - 1) * kSampleThreads < num_quads; q += kQuadsInFlight * kSampleThreads) {
        float4 l[kQuadsInFlight];
#pragma unroll
        for (int k = 0; k < kQuadsInFlight; ++k) l[k] = __ldg(quads + q + k * kSampleThreads);
#pragma unroll
        for (int k = 0; k < kQuadsInFlight; ++k) visit_quad(4 * (q + k * kSampleThreads), l[k], f);
      }
      for (; q < num_quads; q += kSampleThreads) visit_quad(4 * q, __ldg(quads + q), f);
      return;
    }
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

 private:
  template <typename F>
  __device__ void visit_quad(int32_t id, const float4& raw, F& f) const {
    f(id, adjusted(id, raw.x));
    f(id + 1, adjusted(id + 1, raw.y));
    f(id + 2, adjusted(id + 2, raw.z));
    f(id + 3, adjusted(id + 3, raw.w));
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
    return {a.sum + b.sum, a.weighted_z + b.weighted_z, fmaxf(a.e1, b.e1), fmaxf(fminf(a.e1, b.e1), fmaxf(a.e2, b.e2))};
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
  unsigned long long gumbel_bar;  // score_key of the best Gumbel score found so far in the block
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

// The kept set of top-k 1: the most probable id, lowest id on ties (kept_set.h's MoreProbable
// order), found in one pass where the cut's radix descent takes three and the draw a fourth. Ids
// whose logits differ can share a probability, so the logits' argmax is not always it. A draw
// from one id gives that id when its probability is positive, else `fallback` (NaN rows).
__device__ inline int32_t most_probable_id(const SampledRow& row, int V, int32_t fallback, SamplerShared& sm) {
  ArgMax local{-INFINITY, V};
  row.for_each_prob(V, [&](int32_t id, float prob) { local = ArgMaxOp{}(local, {prob, id}); });
  const ArgMax top = reduce_to_all(local, ArgMaxOp{}, sm.reduce.argmax, sm.argmax);
  return top.value > 0.0f && top.id < V ? top.id : fallback;
}

// A Gumbel score as an unsigned key that orders like the score: a non-negative double's bits
// order like its value (the top bit is set to put it above every negative one), a negative
// one's inverted bits do.
__device__ inline unsigned long long score_key(double score) {
  const auto bits = static_cast<unsigned long long>(__double_as_longlong(score));
  return bits >> 63 ? ~bits : bits | (1ull << 63);
}

__device__ inline double key_score(unsigned long long key) {
  return __longlong_as_double(static_cast<long long>(key >> 63 ? key & ~(1ull << 63) : ~key));
}

// argmax over the kept ids (order key >= cut) of ln(p_i) + g_i, g_i = -ln(-ln(u_i)), in float64,
// lowest id on ties, with its score; u_i is lane id0 + i of rng_prefix. Most ids need no
// logarithm: id i beats score b only if u_i > exp(-p_i e^-b) >= 1 - p_i e^-b, so an id whose
// draw falls below 1 - p_i e^-b (minus a margin far above the rounding of the logs) scores below
// b. b is the best score any thread of the block has found so far (the shared bar, raised with
// atomicMax): such an id cannot be the block's winner, whose score is at least every bar, and a
// tie with the bar is never skipped. A bar per thread instead left each thread about
// ln(V / threads) + 1 logarithms, and as the threads of a warp reach them at different ids, the
// warp ran about 32 times as many, which doubled a sampled step's time. `fallback` is the answer
// when no id has a positive probability (NaN rows).
__device__ inline Scored gumbel_max(const SampledRow& row, int V, uint64_t cut, uint64_t rng_prefix, int32_t fallback,
                                    SamplerShared& sm) {
  constexpr double kSkipMargin = 1e-12;
  if (threadIdx.x == 0) sm.gumbel_bar = score_key(-INFINITY);
  __syncthreads();
  const volatile unsigned long long& shared_bar = sm.gumbel_bar;
  Scored best{-INFINITY, INT32_MAX};
  unsigned long long bar = score_key(-INFINITY);
  double win_scale = INFINITY;  // e^-bar
  row.for_each_prob(V, [&](int32_t id, float prob) {
    if (!(prob > 0.0f) || order_key(prob, id) < cut) return;
    if (const unsigned long long now = shared_bar; now != bar) {
      bar = now;
      win_scale = exp(-key_score(bar));
    }
    const double u = uniform_lane(rng_prefix, static_cast<uint64_t>(row.id0 + id));
    if (u < 1.0 - static_cast<double>(prob) * win_scale - kSkipMargin) return;
    const double score = log(static_cast<double>(prob)) - log(-log(u));
    if (score > best.score || (score == best.score && id < best.id)) {
      best = {score, id};
      if (score_key(score) > bar) atomicMax(&sm.gumbel_bar, score_key(score));
    }
  });
  const Scored winner = reduce_to_all(best, ScoredMaxOp{}, sm.reduce.scored, sm.scored);
  return winner.id == INT32_MAX ? Scored{-INFINITY, fallback} : winner;
}

// The largest adjusted logit of the row, lowest id on ties: the greedy token and the softmax
// shift. An all-NaN row gives id 0, as the CPU's argmax does.
__device__ inline ArgMax largest_logit(const SampledRow& row, int V, SamplerShared& sm) {
  ArgMax local{-INFINITY, V};
  row.for_each_logit(V, [&](int32_t id, float l) { local = ArgMaxOp{}(local, {l, id}); });
  ArgMax top = reduce_to_all(local, ArgMaxOp{}, sm.reduce.argmax, sm.argmax);
  if (top.id >= V) top.id = 0;
  return top;
}

// The softmax sums of the row shifted by the scaled logit of `top`; sets row.max_scaled and
// row.inv_sum, after which row(id) is a probability.
__device__ inline SoftmaxSums softmax_sums(SampledRow& row, int V, const ArgMax& top, SamplerShared& sm) {
  row.max_scaled = row.scaled(row.logit(top.id));
  SoftmaxSums local{0.0, 0.0, 0.0f, 0.0f};
  row.for_each_logit(V, [&](int32_t, float l) {
    const float z = row.z(l);
    const float e = expf(z);
    local.sum += e;
    if (e > 0.0f) local.weighted_z += static_cast<double>(e) * z;  // skips -inf (masked) entries
    if (e > local.e1) {
      local.e2 = local.e1;
      local.e1 = e;
    } else if (e > local.e2) {
      local.e2 = e;
    }
  });
  const SoftmaxSums sums = reduce_to_all(local, AddSoftmaxSums{}, sm.reduce.sums, sm.sums);
  row.inv_sum = static_cast<float>(1.0 / sums.sum);
  return sums;
}

__device__ inline float entropy_of(const SoftmaxSums& sums) {
  return static_cast<float>(log(sums.sum) - sums.weighted_z / sums.sum);
}

// Samples one masked position (sampler.cpp's sample_position); every thread of the block calls
// it and gets the result. `seen` is null when the slot's penalty is 1.
__device__ inline PositionSample sample_position(const float* logits, int V, const SlotParams& p, const uint32_t* seen,
                                                 int32_t position, int32_t global_step, SamplerShared& sm) {
  const bool greedy = p.temperature <= 0.0f;
  SampledRow row{logits, seen, p.mask_id, p.repetition_penalty, greedy ? 1.0f : p.temperature};
  const ArgMax top = largest_logit(row, V, sm);
  const SoftmaxSums sums = softmax_sums(row, V, top, sm);
  PositionSample c;
  c.entropy = entropy_of(sums);
  c.margin = V > 1 ? sums.e1 * row.inv_sum - sums.e2 * row.inv_sum : 0.0f;

  if (greedy) {
    c.token = top.id;                  // the argmax of the logits: probabilities can tie where logits do not
  } else if (p.top_k == 1 && V > 1) {  // SDAR's own evaluation samples so (T = 1, top-k 1)
    c.token = most_probable_id(row, V, top.id, sm);
  } else {
    const uint64_t cut = kept_set_cut(row, V, p.top_k, p.top_p, sm.kept);
    const uint64_t rng_prefix =
        uniform_prefix(p.seed, static_cast<uint64_t>(position), static_cast<uint64_t>(global_step));
    c.token = gumbel_max(row, V, cut, rng_prefix, top.id, sm).id;
  }
  c.confidence = row(c.token);
  c.logprob = logf(c.confidence < 1e-12f ? 1e-12f : c.confidence);
  return c;
}

struct VocabPartShared {
  SamplerShared sampler;
  uint64_t candidate_key[kVocabPartCandidates];  // order_key of the slice's top-k ids, as found
  int num_candidates;
};

// One tensor-parallel rank's part of a row (sampling/vocab_parts.cpp's sample_vocab_part):
// `logits` holds ids [vocab0, vocab0 + n) of a V-id row. Every thread of the block calls it;
// thread 0 writes *out, which must be zero already (the fields a part leaves unset are 0).
__device__ inline void sample_vocab_part(const float* logits, int n, int vocab0, int V, const SlotParams& p,
                                         const uint32_t* seen, int32_t position, int32_t global_step,
                                         VocabPartShared& sm, VocabPart* out) {
  const bool sampled = p.temperature > 0.0f;
  SampledRow row{logits, seen, p.mask_id, p.repetition_penalty, sampled ? p.temperature : 1.0f};
  row.id0 = vocab0;
  const ArgMax top = largest_logit(row, n, sm.sampler);
  const float greedy_logit = row.logit(top.id);
  if (threadIdx.x == 0) {
    out->greedy_id = static_cast<float>(vocab0 + top.id);
    out->greedy_logit = greedy_logit;
  }
  if (!(greedy_logit > -INFINITY)) {  // a slice of the mask alone: nothing here can be sampled
    if (threadIdx.x == 0) out->log_mass = -INFINITY;
    return;
  }
  const SoftmaxSums sums = softmax_sums(row, n, top, sm.sampler);
  if (threadIdx.x == 0) {
    const double log_mass = static_cast<double>(row.max_scaled) + log(sums.sum);
    out->log_mass = static_cast<float>(log_mass);
    out->log_mass_low = static_cast<float>(log_mass - static_cast<float>(log_mass));
    out->entropy = entropy_of(sums);
    out->greedy_p = row.prob(greedy_logit);
    out->top1_p = sums.e1 * row.inv_sum;
    out->top2_p = sums.e2 * row.inv_sum;
  }
  if (!sampled) return;
  if (p.top_k > 0 && p.top_k < V) {
    // The slice's top_k, most probable first: the whole row's top_k lies among the slices' ones.
    const int count = min(min(p.top_k, n), kVocabPartCandidates);
    const uint64_t cut = kept_set_cut(row, n, count, 1.0f, sm.sampler.kept);
    if (threadIdx.x == 0) sm.num_candidates = 0;
    __syncthreads();
    row.for_each_prob(n, [&](int32_t id, float prob) {
      const uint64_t key = order_key(prob, id);
      if (key < cut) return;
      const int at = atomicAdd(&sm.num_candidates, 1);
      if (at < kVocabPartCandidates) sm.candidate_key[at] = key;
    });
    __syncthreads();
    if (threadIdx.x == 0) {
      const int found = min(sm.num_candidates, kVocabPartCandidates);
      uint64_t* keys = sm.candidate_key;
      for (int k = 1; k < found; ++k) {  // insertion sort, larger key (earlier in the order) first
        const uint64_t key = keys[k];
        int at = k;
        for (; at > 0 && keys[at - 1] < key; --at) keys[at] = keys[at - 1];
        keys[at] = key;
      }
      out->candidates = static_cast<float>(found);
      for (int k = 0; k < found; ++k) {
        out->candidate_id[k] = static_cast<float>(vocab0 + static_cast<int32_t>(~static_cast<uint32_t>(keys[k])));
        out->candidate_p[k] = __uint_as_float(static_cast<uint32_t>(keys[k] >> 32));
      }
    }
    return;
  }
  const uint64_t rng_prefix =
      uniform_prefix(p.seed, static_cast<uint64_t>(position), static_cast<uint64_t>(global_step));
  const Scored draw = gumbel_max(row, n, 0, rng_prefix, top.id, sm.sampler);
  const float draw_p = row(draw.id);
  if (threadIdx.x == 0) {
    out->draw_id = static_cast<float>(vocab0 + draw.id);
    out->draw_p = draw_p;
    out->draw_score = static_cast<float>(draw.score);
    out->draw_score_low = static_cast<float>(draw.score - static_cast<float>(draw.score));
  }
}

}  // namespace jet::cuda
