// CUDA paged attention (CudaBackend::attention) against the CPU backend's attention and a naive
// double-precision loop over logical (unpaged) K/V, on many batches: prefill and denoise regimes,
// cached lengths up to thousands of keys, 1..300 new tokens, block lengths 1/4/8/32 and
// bidirectional, page sizes 16/64/256 (and odd ones), GQA ratios 1/2/4/8, head_dim 16..128, pages
// scrambled in the page table. The new tokens' K/V are stored at their slots first, as
// qk_norm_rope leaves them. The output is NaN-poisoned before each run and every cache slot not
// holding a sequence's key is NaN, so an unwritten output or a read past the visible keys fails.
// The op must leave the cache as it was.
//
// Usage: test_attention [--quick | --bench]. --quick runs the small cases only (for
// compute-sanitizer); --bench times the denoise and prefill regimes instead of testing (its first
// shape, batch 128 at context 2048, is the one to profile). Prints PASS/FAIL lines, exits 1 on
// any failure. Links against the library, or standalone from the repository root:
//   nvcc -std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr -Isrc -Xcompiler -fopenmp tests/gpu/test_attention.cu
//     src/backend/cuda/*.cu src/backend/*.cpp src/backend/cpu/*.cpp src/core/*.cpp src/sampling/*.cpp
//     -DJET_HAVE_CUDA -lcublasLt -lopenblas -lgomp -o test_attention
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "gpu_test_util.h"
#include "core/dtype.h"

using namespace jet;

namespace {

constexpr uint16_t kBf16NaN = 0x7fc0;
// bf16 outputs of fp32 math: about 3 significant digits (the issue's ~1e-2 relative tolerance).
constexpr double kAtol = 1e-2, kRtol = 1e-2;
// q entries in [-kQRange, kQRange], k and v in [-1, 1]: scaled scores have a standard deviation of
// kQRange / 3, so softmax puts real weight on a few keys and a wrongly masked key shows.
constexpr float kQRange = 6.0f;

struct Case {
  std::string name;
  std::vector<int> cached, fresh;  // per sequence: cached keys, new tokens
  int page_size, nh, nkv, hd, mask_block;
  bool quick = false;  // small enough for compute-sanitizer
};

std::string describe(const Case& c) {
  int max_cached = 0, total_new = 0;
  for (size_t s = 0; s < c.cached.size(); ++s) {
    max_cached = std::max(max_cached, c.cached[s]);
    total_new += c.fresh[s];
  }
  return str(c.name, " [seqs ", c.cached.size(), ", new ", total_new, ", max cached ", max_cached, ", page ",
             c.page_size, ", heads ", c.nh, "/", c.nkv, ", hd ", c.hd, ", mask_block ", c.mask_block, "]");
}

// The batch, its inputs as bf16 bits, and the logical K/V each sequence must end up with.
struct Setup {
  BatchLayout layout;
  int num_pages = 0;
  std::vector<uint16_t> qkv, k_cache, v_cache;   // the cache before the op
  std::vector<std::vector<float>> keys, values;  // per sequence [position][nkv * hd]
};

uint16_t random_bf16(std::mt19937& rng, float range) {
  return f32_to_bf16(std::uniform_real_distribution<float>(-range, range)(rng));
}

Setup make_setup(const Case& c, std::mt19937& rng) {
  const int S = static_cast<int>(c.cached.size()), kv_row = c.nkv * c.hd;
  Setup su;
  BatchLayout& L = su.layout;
  L.num_seqs = S;
  L.mask_block = c.mask_block;
  for (int s = 0; s < S; ++s) {
    const int pages = (c.cached[s] + c.fresh[s] + c.page_size - 1) / c.page_size;
    L.max_pages = std::max(L.max_pages, pages);
    su.num_pages += pages;
  }
  L.max_pages += 1;   // a spare, unused (-1) column: the table's row stride is not the pages used
  su.num_pages += 3;  // pages nobody owns
  // Pages handed out in a scrambled order, so page p of a sequence is not at p in the cache.
  std::vector<int32_t> free_pages(su.num_pages);
  std::iota(free_pages.begin(), free_pages.end(), 0);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  L.page_table.assign(size_t(S) * L.max_pages, -1);
  su.k_cache.assign(size_t(su.num_pages) * c.page_size * kv_row, kBf16NaN);
  su.v_cache = su.k_cache;
  L.seq_starts = {0};
  for (int s = 0; s < S; ++s) {
    const int total = c.cached[s] + c.fresh[s];
    for (int p = 0; p * c.page_size < total; ++p) {
      L.page_table[size_t(s) * L.max_pages + p] = free_pages.back();
      free_pages.pop_back();
    }
    su.keys.emplace_back(size_t(total) * kv_row);
    su.values.emplace_back(size_t(total) * kv_row);
    for (int pos = 0; pos < total; ++pos) {
      const size_t slot =
          (size_t(L.page_table[size_t(s) * L.max_pages + pos / c.page_size]) * c.page_size + pos % c.page_size) *
          kv_row;
      std::vector<uint16_t> k(kv_row), v(kv_row);
      for (auto& x : k) x = random_bf16(rng, 1.0f);
      for (auto& x : v) x = random_bf16(rng, 1.0f);
      if (pos < c.cached[s]) {  // already cached: in the cache only
        std::copy(k.begin(), k.end(), su.k_cache.begin() + slot);
        std::copy(v.begin(), v.end(), su.v_cache.begin() + slot);
      } else {  // new: its qkv row carries q, k and v; its cache slot stays NaN until the op
        for (int i = 0; i < c.nh * c.hd; ++i) su.qkv.push_back(random_bf16(rng, kQRange));
        su.qkv.insert(su.qkv.end(), k.begin(), k.end());
        su.qkv.insert(su.qkv.end(), v.begin(), v.end());
        L.positions.push_back(pos);
      }
      for (int i = 0; i < kv_row; ++i) {
        su.keys[s][size_t(pos) * kv_row + i] = bf16_to_f32(k[i]);
        su.values[s][size_t(pos) * kv_row + i] = bf16_to_f32(v[i]);
      }
    }
    L.cached_lens.push_back(c.cached[s]);
    L.seq_starts.push_back(L.seq_starts.back() + c.fresh[s]);
  }
  L.num_tokens = L.seq_starts.back();
  return su;
}

// The cache as the op must leave it: every new token's K/V bits at its slot.
// The caches as qk_norm_rope leaves them: every new token's K/V (from its qkv row) at its slot.
void stored_caches(const Case& c, const Setup& su, std::vector<uint16_t>& k, std::vector<uint16_t>& v) {
  const int kv_row = c.nkv * c.hd, width = (c.nh + 2 * c.nkv) * c.hd;
  const BatchLayout& L = su.layout;
  k = su.k_cache;
  v = su.v_cache;
  for (int s = 0; s < L.num_seqs; ++s) {
    for (int t = L.seq_starts[s]; t < L.seq_starts[s + 1]; ++t) {
      const int pos = L.positions[t];
      const size_t slot =
          (size_t(L.page_table[size_t(s) * L.max_pages + pos / c.page_size]) * c.page_size + pos % c.page_size) *
          kv_row;
      const uint16_t* row = su.qkv.data() + size_t(t) * width + c.nh * c.hd;
      std::copy(row, row + kv_row, k.begin() + slot);
      std::copy(row + kv_row, row + 2 * kv_row, v.begin() + slot);
    }
  }
}

// body(i) for every i in [0, n), spread over the hardware threads: the naive reference is the
// slow part of the test.
template <typename Body>
void parallel_for(int64_t n, const Body& body) {
  std::atomic<int64_t> next{0};
  std::vector<std::thread> workers(std::max(1u, std::thread::hardware_concurrency()));
  for (std::thread& w : workers) {
    w = std::thread([&] {
      for (int64_t i = next++; i < n; i = next++) body(i);
    });
  }
  for (std::thread& w : workers) w.join();
}

std::vector<double> naive_attention(const Case& c, const Setup& su) {
  const int width = (c.nh + 2 * c.nkv) * c.hd, kv_row = c.nkv * c.hd;
  const BatchLayout& L = su.layout;
  std::vector<int> seq_of(L.num_tokens);
  for (int s = 0; s < L.num_seqs; ++s)
    std::fill(seq_of.begin() + L.seq_starts[s], seq_of.begin() + L.seq_starts[s + 1], s);
  std::vector<double> out(size_t(L.num_tokens) * c.nh * c.hd);
  parallel_for(int64_t{L.num_tokens} * c.nh, [&](int64_t th) {
    const int t = static_cast<int>(th / c.nh), h = static_cast<int>(th % c.nh), s = seq_of[t];
    const int p = L.positions[t], total = c.cached[s] + c.fresh[s], kvh = h / (c.nh / c.nkv);
    std::vector<double> q(c.hd), scores;
    for (int d = 0; d < c.hd; ++d) q[d] = bf16_to_f32(su.qkv[size_t(t) * width + h * c.hd + d]);
    std::vector<int> keys;
    for (int key = 0; key < total; ++key) {
      if (c.mask_block > 0 && key / c.mask_block > p / c.mask_block) continue;
      const float* k = su.keys[s].data() + size_t(key) * kv_row + kvh * c.hd;
      double dot = 0.0;
      for (int d = 0; d < c.hd; ++d) dot += q[d] * k[d];
      scores.push_back(dot / std::sqrt(double(c.hd)));
      keys.push_back(key);
    }
    const double m = *std::max_element(scores.begin(), scores.end());
    double z = 0.0;
    for (double& x : scores) z += x = std::exp(x - m);
    for (int d = 0; d < c.hd; ++d) {
      double acc = 0.0;
      for (size_t i = 0; i < keys.size(); ++i)
        acc += scores[i] * su.values[s][size_t(keys[i]) * kv_row + kvh * c.hd + d];
      out[size_t(th) * c.hd + d] = acc / z;
    }
  });
  return out;
}

// A backend tensor holding `values` (kept alive by `owner`).
template <typename T>
Tensor upload_tensor(Backend& be, std::vector<Buffer>& owner, DType dtype, std::initializer_list<int64_t> dims,
                     const std::vector<T>& values) {
  Tensor t = be.alloc_tensor(owner, dtype, dims);
  if (!values.empty()) be.upload(t.data, values.data(), values.size() * sizeof(T));
  return t;
}

template <typename T>
std::vector<T> download_tensor(Backend& be, const Tensor& t) {
  std::vector<T> out(t.nbytes() / sizeof(T));
  if (!out.empty()) be.download(out.data(), t.data, t.nbytes());
  return out;
}

struct CudaResult {
  std::vector<uint16_t> out, k_cache, v_cache;
};

CudaResult run_cuda(Backend& cuda, const Case& c, const Setup& su, const std::vector<uint16_t>& k_cache,
                    const std::vector<uint16_t>& v_cache) {
  std::vector<Buffer> owner;
  ForwardBatch batch;
  batch.host = su.layout;
  cuda.upload_batch(batch, owner);
  const int64_t T = su.layout.num_tokens, width = (c.nh + 2 * c.nkv) * c.hd;
  Tensor qkv = upload_tensor(cuda, owner, DType::BF16, {T, width}, su.qkv);
  Tensor k = upload_tensor(cuda, owner, DType::BF16, {su.num_pages, c.page_size, c.nkv, c.hd}, k_cache);
  Tensor v = upload_tensor(cuda, owner, DType::BF16, {su.num_pages, c.page_size, c.nkv, c.hd}, v_cache);
  Tensor out = upload_tensor(cuda, owner, DType::BF16, {T, int64_t{c.nh} * c.hd},
                             std::vector<uint16_t>(size_t(T) * c.nh * c.hd, kBf16NaN));
  cuda.attention(qkv, k, v, c.page_size, batch, c.nh, c.nkv, c.hd, out);
  cuda.synchronize();
  return {download_tensor<uint16_t>(cuda, out), download_tensor<uint16_t>(cuda, k), download_tensor<uint16_t>(cuda, v)};
}

std::vector<float> to_f32(const std::vector<uint16_t>& bits) {
  std::vector<float> f(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) f[i] = bf16_to_f32(bits[i]);
  return f;
}

std::vector<float> run_cpu(Backend& cpu, const Case& c, const Setup& su, const std::vector<uint16_t>& k_cache,
                           const std::vector<uint16_t>& v_cache) {
  std::vector<Buffer> owner;
  ForwardBatch batch;
  batch.host = su.layout;
  cpu.upload_batch(batch, owner);
  const int64_t T = su.layout.num_tokens, width = (c.nh + 2 * c.nkv) * c.hd;
  Tensor qkv = upload_tensor(cpu, owner, DType::F32, {T, width}, to_f32(su.qkv));
  Tensor k = upload_tensor(cpu, owner, DType::F32, {su.num_pages, c.page_size, c.nkv, c.hd}, to_f32(k_cache));
  Tensor v = upload_tensor(cpu, owner, DType::F32, {su.num_pages, c.page_size, c.nkv, c.hd}, to_f32(v_cache));
  Tensor out = cpu.alloc_tensor(owner, DType::F32, {T, int64_t{c.nh} * c.hd});
  cpu.attention(qkv, k, v, c.page_size, batch, c.nh, c.nkv, c.hd, out);
  return download_tensor<float>(cpu, out);
}

// Largest |actual - expected|, or a message naming the first element out of tolerance.
struct Comparison {
  double max_error = 0.0;
  std::string failure;
};

template <typename Expected>
Comparison compare(const std::vector<float>& actual, const std::vector<Expected>& expected, const Case& c,
                   const char* what) {
  Comparison r;
  if (actual.size() != expected.size()) {
    r.failure = str(what, ": ", actual.size(), " outputs, expected ", expected.size());
    return r;
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    const double e = expected[i], err = std::fabs(actual[i] - e);
    if (!std::isfinite(actual[i]) || !(err <= kAtol + kRtol * std::fabs(e))) {
      const size_t row = i / c.hd;
      r.failure = str(what, ": token ", row / c.nh, " head ", row % c.nh, " dim ", i % c.hd, " is ", actual[i],
                      ", expected ", e);
      return r;
    }
    r.max_error = std::max(r.max_error, err);
  }
  return r;
}

bool run_case(Backend& cuda, Backend& cpu, const Case& c, std::mt19937& rng) {
  const Setup su = make_setup(c, rng);
  std::string failure;
  double err_naive = 0.0, err_cpu = 0.0;
  try {
    std::vector<uint16_t> k_cache, v_cache;
    stored_caches(c, su, k_cache, v_cache);
    const CudaResult r = run_cuda(cuda, c, su, k_cache, v_cache);
    const std::vector<float> out = to_f32(r.out);
    const Comparison vs_naive = compare(out, naive_attention(c, su), c, "vs naive");
    const Comparison vs_cpu = compare(out, run_cpu(cpu, c, su, k_cache, v_cache), c, "vs cpu backend");
    err_naive = vs_naive.max_error;
    err_cpu = vs_cpu.max_error;
    if (r.k_cache != k_cache) failure = "attention changed the k cache";
    if (r.v_cache != v_cache) failure = "attention changed the v cache";
    if (!vs_cpu.failure.empty()) failure = vs_cpu.failure;
    if (!vs_naive.failure.empty()) failure = vs_naive.failure;
  } catch (const std::exception& e) {
    failure = str("threw: ", e.what());
  }
  std::printf("%s %s: max |err| vs naive %.2e, vs cpu %.2e%s%s\n", failure.empty() ? "PASS" : "FAIL",
              describe(c).c_str(), err_naive, err_cpu, failure.empty() ? "" : " -- ", failure.c_str());
  std::fflush(stdout);
  return failure.empty();
}

// More CTAs than one wave (132 multiprocessors x 3): `seqs` sequences of `fresh` new tokens after
// cached prefixes of varied length, or with `prefill_every` > 0 every such sequence a prompt of
// 100 to 199 tokens instead, so the denoise sequences leave most of the grid's row tiles empty.
Case many_ctas_case(std::string name, int seqs, int fresh, int prefill_every) {
  Case c{std::move(name), {}, {}, 64, 32, 8, 128, 4};
  for (int s = 0; s < seqs; ++s) {
    const bool prompt = prefill_every > 0 && s % prefill_every == 0;
    c.cached.push_back(prompt ? 0 : s * 37 % 700 / 4 * 4);
    c.fresh.push_back(prompt ? 100 + s * 13 % 100 : fresh);
  }
  return c;
}

std::vector<Case> targeted_cases() {
  std::vector<int> many_cached(64);
  for (size_t i = 0; i < many_cached.size(); ++i) many_cached[i] = int(i * 52 % 1024) / 4 * 4;
  // 250 single-kv-head sequences, one with a long prefix: 250 CTAs fill a wave of the dim-split
  // kernel's 660 poorly, so the keys split 5 ways into 1,250 CTAs, and the short sequences' later
  // splits are empty.
  std::vector<int> one_long(250, 8);
  one_long[0] = 3000;
  return {
      many_ctas_case("denoise, 200 sequences (several waves)", 200, 4, 0),
      many_ctas_case("save and next block, 160 sequences (32 rows, several waves)", 160, 8, 0),
      many_ctas_case("prompts among denoise rows (empty row tiles)", 48, 4, 2),
      {"key splits past one wave (empty splits)", one_long, std::vector<int>(250, 4), 16, 4, 1, 128, 4, true},
      {"denoise, two long prefixes (key splits)", {2048, 1500}, {4, 4}, 64, 32, 8, 128, 4, true},
      {"denoise, long and short prefixes (empty splits)", {3000, 8, 0}, {4, 4, 4}, 16, 32, 8, 128, 4, true},
      // Key splits of 7 row tiles of 64 rows, beside a sequence of one 16-row tile (its other row
      // tiles' CTAs return at once).
      {"key splits over row tiles: 100 new tokens after 3,000 keys", {3000, 2000}, {100, 4}, 64, 32, 8, 128, 4, true},
      {"prefill, one bidirectional prompt", {0}, {300}, 64, 32, 8, 128, 0},
      {"prefill B=32 next to denoise rows", {0, 512, 100}, {300, 32, 77}, 256, 16, 8, 128, 32},
      {"denoise, 64 sequences (no split)", many_cached, std::vector<int>(64, 4), 64, 32, 8, 128, 4},
      {"denoise, GQA 8: 32 rows per sequence", {100, 37}, {4, 4}, 16, 32, 4, 128, 4, true},
      {"one token per sequence, MHA, B=1", {0, 5, 63}, {1, 1, 1}, 16, 4, 4, 64, 1, true},
      {"tiny model, head_dim 16", {0, 5, 13}, {7, 3, 1}, 4, 4, 2, 16, 4, true},
      {"head_dim 32, one key per page, bidirectional", {2, 0, 9}, {4, 9, 4}, 1, 2, 2, 32, 0, true},
      {"page size 3 not dividing the block", {8, 3}, {8, 5}, 3, 6, 3, 64, 4, true},
      {"a sequence with no new tokens", {10, 20}, {0, 5}, 16, 8, 2, 64, 4, true},
      {"save and next block in one forward", {16}, {8}, 8, 4, 1, 64, 4, true},
      {"head_dim 64, long prefix, GQA 2 (key splits)", {1200}, {8}, 256, 8, 4, 64, 8, true},
      // Which kernel runs the rows of sequences of at most 16 rows (attention.cu, use_dim_split):
      {"dim-split kernel, head_dim 64, key splits", std::vector<int>(12, 400), std::vector<int>(12, 4), 256, 16, 4, 64,
       4, true},
      {"attention_kernel: one sequence of 16 rows (too few CTAs for the dim-split kernel)",
       {300},
       {4},
       64,
       32,
       8,
       128,
       4,
       true},
      {"dim-split kernel, 40 prefixes of 1,000 keys (key splits)", std::vector<int>(40, 1000), std::vector<int>(40, 4),
       64, 32, 8, 128, 4},
      {"attention_kernel: 100 prefixes of 600 keys (more CTAs than one dim-split wave)", std::vector<int>(100, 600),
       std::vector<int>(100, 4), 64, 32, 8, 128, 4},
      // The dim-split kernel's 32-row CTAs (two row groups), from at least 33 CTAs:
      {"dim-split kernel, 32 rows, short prefixes",
       {0, 4, 40, 100, 200, 256, 300, 64},
       std::vector<int>(8, 8),
       64,
       32,
       8,
       128,
       4},
      {"dim-split kernel, 20 rows at head_dim 64 (a part-filled row group)", std::vector<int>(10, 36),
       std::vector<int>(10, 5), 16, 16, 4, 64, 4},
      {"dim-split kernel, 32 rows, key splits", std::vector<int>(5, 1500), std::vector<int>(5, 8), 64, 32, 8, 128, 4},
      {"dim-split kernel, 32- and 16-row sequences (empty row groups), page 7",
       {10, 20, 30, 40, 50, 60},
       {8, 4, 8, 4, 8, 4},
       7,
       32,
       8,
       128,
       4},
      {"dim-split kernel, 32 rows, page 32", std::vector<int>(6, 96), std::vector<int>(6, 8), 32, 32, 8, 128, 4},
  };
}

template <typename T>
T pick(std::mt19937& rng, std::initializer_list<T> options) {
  return *(options.begin() + std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng));
}

int uniform(std::mt19937& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// Random prefill, denoise and mixed batches over the parameter grid of the issue.
Case random_case(std::mt19937& rng, int index) {
  Case c;
  c.hd = pick(rng, {16, 32, 64, 64, 128, 128});
  const int group = pick(rng, {1, 2, 4, 8});
  c.nkv = pick(rng, {1, 2, 4});
  c.nh = c.nkv * group;
  c.page_size = pick(rng, {16, 64, 256, 16, 64, 256, 7});
  const int B = pick(rng, {1, 4, 8, 32});
  c.mask_block = pick(rng, {0, B});
  const int regime = uniform(rng, 0, 2);  // 0 prefill, 1 denoise, 2 mixed
  c.name = str("random ", index, regime == 0 ? " prefill" : regime == 1 ? " denoise" : " mixed");
  const int seqs = uniform(rng, 1, 6);
  for (int s = 0; s < seqs; ++s) {
    const bool prefill = regime == 0 || (regime == 2 && uniform(rng, 0, 1) == 0);
    if (prefill) {
      c.cached.push_back(uniform(rng, 0, 1) ? 0 : uniform(rng, 0, 200));
      c.fresh.push_back(uniform(rng, 1, 300));
    } else {
      c.cached.push_back(B * uniform(rng, 0, 2500 / B));
      c.fresh.push_back(B);
    }
  }
  return c;
}

// --- Timing ------------------------------------------------------------------------------------------

struct BenchShape {
  const char* regime;
  int seqs, cached, fresh, mask_block;
};

void bench(cuda::CudaBackend& cuda) {
  constexpr int kNh = 32, kNkv = 8, kHd = 128, kPage = 64, kIters = 20;
  constexpr double kPeakBytesPerS = 4.8e12;
  // Denoise: long prefixes over batch sizes (99 sequences fill whole waves of 3 CTAs per
  // multiprocessor), the short prefixes of the throughput benchmark (prompt 64, 128 new tokens),
  // and one very long prefix (key splits); with 8 new tokens, a block's first forward, which holds
  // the saved block and the next one as one entry (32 rows per kv head). Prefill: block-causal
  // and bidirectional prompts.
  const BenchShape shapes[] = {
      {"denoise", 128, 2048, 4, 4}, {"denoise", 1, 2048, 4, 4},   {"denoise", 8, 2048, 4, 4},
      {"denoise", 32, 2048, 4, 4},  {"denoise", 99, 2048, 4, 4},  {"denoise", 128, 4096, 4, 4},
      {"denoise", 128, 64, 4, 4},   {"denoise", 128, 192, 4, 4},  {"denoise", 1, 16384, 4, 4},
      {"denoise", 32, 2048, 8, 4},  {"denoise", 128, 192, 8, 4},  {"denoise", 128, 320, 4, 4},
      {"denoise", 128, 704, 4, 4},  {"denoise", 128, 1024, 4, 4}, {"denoise", 64, 1024, 4, 4},
      {"denoise", 64, 2048, 4, 4},  {"prefill", 4, 0, 1024, 4},   {"prefill", 4, 0, 1024, 0},
      {"prefill", 16, 0, 256, 4},
  };
  std::mt19937 rng(11);
  for (const BenchShape& b : shapes) {
    BatchLayout L;
    L.num_seqs = b.seqs;
    L.mask_block = b.mask_block;
    L.max_pages = (b.cached + b.fresh + kPage - 1) / kPage;
    const int num_pages = b.seqs * L.max_pages;
    std::vector<int32_t> pages(num_pages);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    L.page_table = pages;
    L.seq_starts = {0};
    double visible_keys = 0.0;  // summed over query tokens
    for (int s = 0; s < b.seqs; ++s) {
      for (int i = 0; i < b.fresh; ++i) {
        const int p = b.cached + i;
        L.positions.push_back(p);
        const int total = b.cached + b.fresh;
        visible_keys += b.mask_block > 0 ? std::min(total, (p / b.mask_block + 1) * b.mask_block) : total;
      }
      L.cached_lens.push_back(b.cached);
      L.seq_starts.push_back(L.seq_starts.back() + b.fresh);
    }
    L.num_tokens = L.seq_starts.back();
    std::vector<Buffer> owner;
    ForwardBatch batch;
    batch.host = L;
    cuda.upload_batch(batch, owner);
    const int64_t T = L.num_tokens;
    Tensor qkv = cuda.alloc_tensor(owner, DType::BF16, {T, (kNh + 2 * kNkv) * kHd});
    Tensor k = cuda.alloc_tensor(owner, DType::BF16, {num_pages, kPage, kNkv, kHd});
    Tensor v = cuda.alloc_tensor(owner, DType::BF16, {num_pages, kPage, kNkv, kHd});
    Tensor out = cuda.alloc_tensor(owner, DType::BF16, {T, kNh * kHd});
    for (const Tensor* t : {&qkv, &k, &v}) JET_CUDA_CHECK(cudaMemsetAsync(t->data, 0x3c, t->nbytes(), cuda.stream()));
    for (int i = 0; i < 3; ++i) cuda.attention(qkv, k, v, kPage, batch, kNh, kNkv, kHd, out);
    cudaEvent_t start, stop;
    JET_CUDA_CHECK(cudaEventCreate(&start));
    JET_CUDA_CHECK(cudaEventCreate(&stop));
    JET_CUDA_CHECK(cudaEventRecord(start, cuda.stream()));
    for (int i = 0; i < kIters; ++i) cuda.attention(qkv, k, v, kPage, batch, kNh, kNkv, kHd, out);
    JET_CUDA_CHECK(cudaEventRecord(stop, cuda.stream()));
    JET_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    JET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    JET_CUDA_CHECK(cudaEventDestroy(start));
    JET_CUDA_CHECK(cudaEventDestroy(stop));
    const double seconds = ms / 1e3 / kIters;
    // Bytes: every sequence's K and V read once (the floor for a memory-bound call).
    const double kv_bytes = 2.0 * b.seqs * (b.cached + b.fresh) * kNkv * kHd * sizeof(uint16_t);
    const double flops = 4.0 * visible_keys * kNh * kHd;  // QKᵀ and PV, 2 flops per multiply-add
    std::printf(
        "BENCH %s seqs=%d cached=%d new=%d mask_block=%d heads %d/%d hd %d: %.1f us/call, KV %.1f MB -> "
        "%.2f TB/s (%.0f%% of 4.8), %.1f TFLOP/s\n",
        b.regime, b.seqs, b.cached, b.fresh, b.mask_block, kNh, kNkv, kHd, seconds * 1e6, kv_bytes / 1e6,
        kv_bytes / seconds / 1e12, 100.0 * kv_bytes / seconds / kPeakBytesPerS, flops / seconds / 1e12);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (jet::gpu_test::skip_without_device()) return jet::gpu_test::kSkipWithoutDevice;
  bool quick = false, timing = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--bench") {
      timing = true;
    } else {
      std::fprintf(stderr, "usage: %s [--quick | --bench]\n", argv[0]);
      return 2;
    }
  }
  try {
    cuda::CudaBackend cuda(0);
    if (timing) {
      bench(cuda);
      return 0;
    }
    std::unique_ptr<Backend> cpu = make_cpu_backend(0);
    std::mt19937 rng(2024);
    std::vector<Case> cases = targeted_cases();
    if (quick) {
      std::erase_if(cases, [](const Case& c) { return !c.quick; });
    } else {
      for (int i = 0; i < 80; ++i) cases.push_back(random_case(rng, i));
    }
    int failures = 0;
    for (const Case& c : cases) failures += !run_case(cuda, *cpu, c, rng);
    std::printf("%s: %d of %zu attention cases failed\n", failures ? "FAIL" : "PASS", failures, cases.size());
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
