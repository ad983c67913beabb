// The kept set K of top-k / top-p sampling on the GPU (docs/decoding.md §3, step 5), found by
// one thread block without sorting. K is always a prefix of the ids ordered by probability
// descending, ties to the lower id (kept_set.h's MoreProbable), so it is fixed by its last member,
// the cut. A radix descent over the 32 probability bits (digits of 11, 11 and 10 bits) finds the
// probability at which the prefix's id count (top-k) or probability mass (top-p) reaches its
// goal; ids tied at that probability are then taken lowest id first.
#pragma once

#include <cstdint>
#include <cub/block/block_scan.cuh>

namespace jet::cuda {

// The order as one unsigned key, larger = earlier: probabilities are >= 0, so their bits order
// like their values, and the inverted id puts the lower id first among equal probabilities.
__device__ __forceinline__ uint64_t order_key(float prob, int32_t id) {
  return (static_cast<uint64_t>(__float_as_uint(prob)) << 32) | ~static_cast<uint32_t>(id);
}

// Probability mass in units of 2^-62. Integer sums are exact whatever the summation order, so
// every level of the descent sees the same totals (the loss, under 2^-62 per id, is far below
// the float resolution of the probabilities).
__device__ __forceinline__ unsigned long long fixed_mass(float prob) { return __float2ull_rz(prob * 0x1p62f); }

// The mass of the id an order key stands for (its probability is the key's upper word).
__device__ __forceinline__ unsigned long long key_mass(uint64_t key) {
  return fixed_mass(__uint_as_float(static_cast<uint32_t>(key >> 32)));
}

struct CountMass {
  uint32_t count;
  unsigned long long mass;
};

struct AddCountMass {
  __device__ CountMass operator()(const CountMass& a, const CountMass& b) const {
    return {a.count + b.count, a.mass + b.mass};
  }
};

// What a prefix of the order must reach: `count` ids (top-k), or the share top_p of the
// candidates' mass (top-p, the sum renormalised over the candidates as in kept_set.cpp).
struct CutGoal {
  bool by_mass;
  uint32_t count;
  double top_p;

  __device__ bool reached(const CountMass& prefix, unsigned long long candidates_mass) const {
    return by_mass ? static_cast<double>(prefix.mass) / static_cast<double>(candidates_mass) >= top_p
                   : prefix.count >= count;
  }
  // Whether the shortest prefix that reaches the goal ends in a group of ids (a bucket, or one
  // id) that `before` precedes and `including` takes in.
  __device__ bool ends_in(const CountMass& before, const CountMass& including,
                          unsigned long long candidates_mass) const {
    return reached(including, candidates_mass) && (before.count == 0 || !reached(before, candidates_mass));
  }
};

constexpr int kCutBuckets = 2048;  // one per value of an 11-bit digit
// A crossing bucket of at most this many ids is gathered into shared memory and its cut found
// there, instead of by the digits left and the tie scan (each a pass over the row).
constexpr int kGatherCap = 256;

template <int kThreads>
struct KeptSetShared {
  uint32_t count[kCutBuckets];
  // Each bucket's mass as two 32-bit words, added to with two 32-bit atomics: a 64-bit atomic add
  // on shared memory is a compare-and-swap loop on Hopper, and with most of a flat row's ids in a
  // few buckets of the first digit, those loops made a top-p step at batch 128 more than twice as
  // slow.
  uint32_t mass_low[kCutBuckets], mass_high[kCutBuckets];
  union {
    typename cub::BlockScan<CountMass, kThreads>::TempStorage buckets;
    typename cub::BlockScan<int, kThreads>::TempStorage ties;
  } scan;
  CountMass before;  // the prefix before the crossing bucket
  uint32_t digit;    // the crossing bucket
  uint32_t tie_count;
  int32_t tie_id;
  bool found;
  uint32_t gathered;                   // ids in gathered_keys
  uint64_t gathered_keys[kGatherCap];  // order keys of the crossing bucket's ids
  uint64_t gathered_cut;

  __device__ void add_mass(int bucket, unsigned long long m) {
    const auto low = static_cast<uint32_t>(m);
    const uint32_t carry = atomicAdd(&mass_low[bucket], low) > 0xFFFFFFFFu - low;  // the low word wrapped
    const uint32_t high = static_cast<uint32_t>(m >> 32) + carry;
    if (high != 0) atomicAdd(&mass_high[bucket], high);
  }
  __device__ unsigned long long mass(int bucket) const {
    return static_cast<unsigned long long>(mass_high[bucket]) << 32 | mass_low[bucket];
  }
};

// The cut among the candidates whose probability bits match `prefix` under `prefix_mask`, at most
// kGatherCap of them, of which the shortest prefix of the order that reaches `goal` ends inside
// (`above`: the candidates before them). One pass gathers their order keys; each then finds its
// rank and the mass before it among the others, and the one whose inclusive prefix first reaches
// the goal is the cut (the integer masses make every sum exact, so this is the id the digits
// and the tie scan would find).
template <int kThreads, typename Probs>
__device__ uint64_t gathered_cut(const Probs& probs, int V, uint64_t floor, const CutGoal goal, uint32_t prefix,
                                 uint32_t prefix_mask, CountMass above, unsigned long long candidates_mass,
                                 KeptSetShared<kThreads>& sm) {
  static_assert(kGatherCap <= kThreads, "one gathered id per thread");
  if (threadIdx.x == 0) {
    sm.gathered = 0;
    sm.gathered_cut = floor;
  }
  __syncthreads();
  probs.for_each_prob(V, [&](int32_t id, float prob) {
    const uint32_t bits = __float_as_uint(prob);
    if ((bits & prefix_mask) != prefix || order_key(prob, id) < floor) return;
    const uint32_t slot = atomicAdd(&sm.gathered, 1u);
    if (slot < kGatherCap) sm.gathered_keys[slot] = order_key(prob, id);
  });
  __syncthreads();
  const uint32_t n = min(sm.gathered, static_cast<uint32_t>(kGatherCap));
  if (threadIdx.x < n) {
    const uint64_t key = sm.gathered_keys[threadIdx.x];
    CountMass before = above;
    for (uint32_t k = 0; k < n; ++k) {
      const uint64_t other = sm.gathered_keys[k];
      if (other <= key) continue;
      before.count += 1;
      if (goal.by_mass) before.mass += key_mass(other);
    }
    const CountMass including{before.count + 1, before.mass + (goal.by_mass ? key_mass(key) : 0)};
    if (goal.ends_in(before, including, candidates_mass)) sm.gathered_cut = key;
  }
  __syncthreads();
  const uint64_t cut = sm.gathered_cut;
  __syncthreads();  // shared state is free for the next caller
  return cut;
}

// The cut of the shortest prefix of the candidates (ids of order key >= floor) that reaches
// `goal`, as the order key of its last id; `floor` when no prefix does (top-p whose sums round
// below top_p keeps every candidate, as kept_set.cpp does). Called by every thread of the block;
// probs(id) is id's probability, and probs.for_each_prob(V, f) calls f(id, probability) for the
// calling thread's share of the ids. Kept out of line: its registers would otherwise crowd the
// sampler's common path (no top-k / top-p) into spilling.
template <int kThreads, typename Probs>
__device__ __noinline__ uint64_t select_cut(const Probs& probs, int V, uint64_t floor, const CutGoal goal,
                                            KeptSetShared<kThreads>& sm) {
  constexpr int kItems = kCutBuckets / kThreads;
  static_assert(kItems * kThreads == kCutBuckets, "the bucket scan gives every thread the same number of buckets");
  const int tid = threadIdx.x;

  uint32_t prefix = 0, prefix_mask = 0;  // the probability bits fixed so far
  CountMass above{0, 0};                 // candidates whose bits exceed the prefix
  unsigned long long candidates_mass = 0;
  uint32_t tie_count = 0;
  int shift = 32;
  for (int level = 0; level < 3; ++level) {
    const int width = level < 2 ? 11 : 10;
    shift -= width;
    const uint32_t digit_mask = (1u << width) - 1;

    for (int b = tid; b < kCutBuckets; b += kThreads) {
      sm.count[b] = 0;
      sm.mass_low[b] = 0;
      sm.mass_high[b] = 0;
    }
    if (tid == 0) sm.found = false;
    __syncthreads();
    probs.for_each_prob(V, [&](int32_t id, float prob) {
      const uint32_t bits = __float_as_uint(prob);
      if ((bits & prefix_mask) != prefix || order_key(prob, id) < floor) return;
      const uint32_t digit = (bits >> shift) & digit_mask;
      atomicAdd(&sm.count[digit], 1u);
      if (goal.by_mass) sm.add_mass(digit, fixed_mass(prob));
    });
    __syncthreads();

    // Thread t scans buckets t * kItems ... t * kItems + kItems - 1 of the order, bucket s being
    // digit kCutBuckets - 1 - s: largest probabilities first.
    auto bucket = [&](int k) {
      const int digit = kCutBuckets - 1 - (tid * kItems + k);
      return CountMass{sm.count[digit], sm.mass(digit)};
    };
    CountMass mine{0, 0}, preceding, total;
    for (int k = 0; k < kItems; ++k) mine = AddCountMass{}(mine, bucket(k));
    cub::BlockScan<CountMass, kThreads>(sm.scan.buckets)
        .ExclusiveScan(mine, preceding, CountMass{0, 0}, AddCountMass{}, total);
    if (level == 0) candidates_mass = total.mass;
    // The crossing bucket: the first non-empty one whose inclusive prefix reaches the goal.
    preceding = AddCountMass{}(above, preceding);
    for (int k = 0; k < kItems; ++k) {
      const CountMass in_bucket = bucket(k);
      const CountMass including = AddCountMass{}(preceding, in_bucket);
      if (in_bucket.count > 0 && goal.ends_in(preceding, including, candidates_mass)) {
        sm.digit = kCutBuckets - 1 - (tid * kItems + k);
        sm.before = preceding;
        sm.tie_count = in_bucket.count;
        sm.found = true;
      }
      preceding = including;
    }
    __syncthreads();
    const bool found = sm.found;
    const uint32_t digit = sm.digit;
    above = sm.before;
    tie_count = sm.tie_count;
    __syncthreads();  // shared state is free for the next level or the next caller
    if (!found) return floor;
    prefix |= digit << shift;
    prefix_mask |= digit_mask << shift;
    if (level < 2 && tie_count <= kGatherCap) {
      return gathered_cut(probs, V, floor, goal, prefix, prefix_mask, above, candidates_mass, sm);
    }
  }

  // `prefix` is now the cut's probability bits: take the `need` lowest of the tie_count ids that have it.
  uint32_t need = goal.count - above.count;
  if (goal.by_mass) {  // the fewest ids whose added mass reaches the goal (all tie_count of them do)
    const unsigned long long each = fixed_mass(__uint_as_float(prefix));
    uint32_t lo = 1, hi = tie_count;
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (goal.reached({above.count + mid, above.mass + mid * each}, candidates_mass)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    need = lo;
  }
  const uint64_t group_key = static_cast<uint64_t>(prefix) << 32;
  if (need >= tie_count) return group_key > floor ? group_key : floor;

  // The need-th lowest tied id, scanning the ids in order one block-wide chunk at a time.
  uint32_t counted = 0;
  for (int32_t chunk = 0; chunk < V; chunk += kThreads) {
    const int32_t id = chunk + tid;
    bool tied = false;
    if (id < V) {
      const float prob = probs(id);
      tied = __float_as_uint(prob) == prefix && order_key(prob, id) >= floor;
    }
    int rank = 0, chunk_ties = 0;
    cub::BlockScan<int, kThreads>(sm.scan.ties).ExclusiveSum(tied ? 1 : 0, rank, chunk_ties);
    if (tied && counted + rank + 1 == need) sm.tie_id = id;
    counted += chunk_ties;
    __syncthreads();
    if (counted >= need) break;
  }
  const int32_t tie_id = sm.tie_id;
  __syncthreads();
  return order_key(__uint_as_float(prefix), tie_id);
}

// The cut of K for a slot's top_k / top_p (0, every id, when neither applies); an id is in K iff
// order_key(probs(id), id) >= the cut.
template <int kThreads, typename Probs>
__device__ uint64_t kept_set_cut(const Probs& probs, int V, int32_t top_k, float top_p, KeptSetShared<kThreads>& sm) {
  uint64_t cut = 0;
  if (top_k > 0 && top_k < V) cut = select_cut(probs, V, cut, CutGoal{false, static_cast<uint32_t>(top_k), 0.0}, sm);
  if (top_p < 1.0f) cut = select_cut(probs, V, cut, CutGoal{true, 0, static_cast<double>(top_p)}, sm);
  return cut;
}

}  // namespace jet::cuda
