// Paged attention against a naive per-query loop over logical (unpaged) K/V: several batch
// shapes, GQA, bidirectional and block-causal masks, pages in scrambled order (the new tokens' K/V
// stored at their slots first, as qk_norm_rope does); the cache is left as it was, and later
// blocks must not leak.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend_test_util.h"

using namespace jet;
using namespace jet::test;

namespace {

struct Case {
  std::vector<int> cached, fresh;  // per sequence: cached tokens, new tokens
  int page_size, nh, nkv, hd, mask_block;
};

// A batch plus the logical K/V every sequence should end up with: keys[s][pos * kv_row + ...].
struct BatchSetup {
  BatchLayout layout;
  std::vector<std::vector<float>> keys, values;
  std::vector<float> qkv;
  std::vector<float> k_cache, v_cache;  // the cache before the op
};

BatchSetup make_setup(const Case& c, std::mt19937& rng, int num_pages) {
  const int S = static_cast<int>(c.cached.size()), kv_row = c.nkv * c.hd, width = (c.nh + 2 * c.nkv) * c.hd;
  BatchSetup su;
  BatchLayout& L = su.layout;
  L.num_seqs = S;
  L.mask_block = c.mask_block;
  L.max_pages = 0;
  for (int s = 0; s < S; ++s)
    L.max_pages = std::max(L.max_pages, (c.cached[s] + c.fresh[s] + c.page_size - 1) / c.page_size);
  // Pages handed out in a scrambled order, so page p of a sequence is not at p in the cache.
  std::vector<int32_t> free_pages(num_pages);
  std::iota(free_pages.begin(), free_pages.end(), 0);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  L.page_table.assign(S * L.max_pages, -1);
  su.k_cache = random_floats(rng, size_t(num_pages) * c.page_size * kv_row);
  su.v_cache = random_floats(rng, su.k_cache.size());
  L.seq_starts = {0};
  for (int s = 0; s < S; ++s) {
    const int total = c.cached[s] + c.fresh[s];
    for (int p = 0; p * c.page_size < total; ++p) {
      L.page_table[s * L.max_pages + p] = free_pages.back();
      free_pages.pop_back();
    }
    su.keys.emplace_back(size_t(total) * kv_row);
    su.values.emplace_back(size_t(total) * kv_row);
    for (int pos = 0; pos < total; ++pos) {
      const size_t slot =
          (size_t(L.page_table[s * L.max_pages + pos / c.page_size]) * c.page_size + pos % c.page_size) * kv_row;
      const std::vector<float> q_k_v = random_floats(rng, width);
      if (pos < c.cached[s]) {  // already cached: logical K/V are what the cache holds
        std::copy_n(su.k_cache.begin() + slot, kv_row, su.keys[s].begin() + pos * kv_row);
        std::copy_n(su.v_cache.begin() + slot, kv_row, su.values[s].begin() + pos * kv_row);
      } else {  // new token: its row of qkv carries its K/V
        su.qkv.insert(su.qkv.end(), q_k_v.begin(), q_k_v.end());
        std::copy_n(q_k_v.begin() + c.nh * c.hd, kv_row, su.keys[s].begin() + pos * kv_row);
        std::copy_n(q_k_v.begin() + c.nh * c.hd + kv_row, kv_row, su.values[s].begin() + pos * kv_row);
        L.positions.push_back(pos);
      }
    }
    L.cached_lens.push_back(c.cached[s]);
    L.seq_starts.push_back(L.seq_starts.back() + c.fresh[s]);
  }
  L.num_tokens = L.seq_starts.back();
  return su;
}

std::vector<float> naive_attention(const Case& c, const BatchSetup& su) {
  const int width = (c.nh + 2 * c.nkv) * c.hd, kv_row = c.nkv * c.hd;
  std::vector<float> out;
  for (int s = 0; s < su.layout.num_seqs; ++s) {
    const int total = c.cached[s] + c.fresh[s];
    for (int t = su.layout.seq_starts[s]; t < su.layout.seq_starts[s + 1]; ++t) {
      const int p = su.layout.positions[t];
      for (int h = 0; h < c.nh; ++h) {
        const float* q = su.qkv.data() + t * width + h * c.hd;
        const int kvh = h / (c.nh / c.nkv);
        std::vector<double> scores;
        std::vector<int> keys;
        for (int key = 0; key < total; ++key) {
          if (c.mask_block > 0 && key / c.mask_block > p / c.mask_block) continue;
          double dot = 0.0;
          for (int d = 0; d < c.hd; ++d) dot += double{q[d]} * su.keys[s][key * kv_row + kvh * c.hd + d];
          scores.push_back(dot / std::sqrt(double(c.hd)));
          keys.push_back(key);
        }
        const double m = *std::max_element(scores.begin(), scores.end());
        double z = 0.0;
        for (double& x : scores) z += x = std::exp(x - m);
        for (int d = 0; d < c.hd; ++d) {
          double acc = 0.0;
          for (size_t i = 0; i < keys.size(); ++i) acc += scores[i] * su.values[s][keys[i] * kv_row + kvh * c.hd + d];
          out.push_back(static_cast<float>(acc / z));
        }
      }
    }
  }
  return out;
}

struct RunResult {
  std::vector<float> out, k_cache, v_cache;  // the caches after the op
  std::vector<float> k_given, v_given;       // and as the op got them
};

// The cache as qk_norm_rope leaves it for attention: every new token's K/V (from its qkv row) at
// its page slot, the other slots as the setup made them.
void store_new_kv(const Case& c, const BatchSetup& su, std::vector<float>& k_cache, std::vector<float>& v_cache) {
  const BatchLayout& L = su.layout;
  const int kv_row = c.nkv * c.hd, width = (c.nh + 2 * c.nkv) * c.hd;
  for (int s = 0; s < L.num_seqs; ++s) {
    for (int t = L.seq_starts[s]; t < L.seq_starts[s + 1]; ++t) {
      const int pos = L.positions[t];
      const size_t slot =
          (size_t(L.page_table[s * L.max_pages + pos / c.page_size]) * c.page_size + pos % c.page_size) * kv_row;
      std::copy_n(su.qkv.begin() + size_t(t) * width + c.nh * c.hd, kv_row, k_cache.begin() + slot);
      std::copy_n(su.qkv.begin() + size_t(t) * width + c.nh * c.hd + kv_row, kv_row, v_cache.begin() + slot);
    }
  }
}

RunResult run_attention(Backend& be, const Case& c, const BatchSetup& su, int num_pages) {
  TensorFactory tf(be);
  std::vector<Buffer> owner;
  ForwardBatch batch;
  batch.host = su.layout;
  be.upload_batch(batch, owner);
  const int T = su.layout.num_tokens, width = (c.nh + 2 * c.nkv) * c.hd;
  RunResult r;
  r.k_given = su.k_cache;
  r.v_given = su.v_cache;
  store_new_kv(c, su, r.k_given, r.v_given);
  Tensor k = tf.f32({num_pages, c.page_size, c.nkv, c.hd}, r.k_given);
  Tensor v = tf.f32({num_pages, c.page_size, c.nkv, c.hd}, r.v_given);
  Tensor out = tf.poisoned({T, c.nh * c.hd});
  be.attention(tf.f32({T, width}, su.qkv), k, v, c.page_size, batch, c.nh, c.nkv, c.hd, out);
  r.out = tf.read<float>(out);
  r.k_cache = tf.read<float>(k);
  r.v_cache = tf.read<float>(v);
  return r;
}

class Attention : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  std::mt19937 rng{7};
};

}  // namespace

TEST_F(Attention, MatchesNaiveAttentionAndOnlyReadsTheCache) {
  const Case cases[] = {
      {{0}, {7}, 4, 5, 1, 8, 0},               // one prefill-like sequence, MQA
      {{0, 5, 13}, {7, 3, 1}, 4, 4, 2, 6, 4},  // mixed cached lengths, block-causal
      {{8, 3}, {8, 5}, 3, 6, 3, 8, 4},         // page size not dividing the block
      {{2, 0, 9}, {4, 9, 4}, 1, 2, 2, 4, 0},   // one token per page, MHA, bidirectional
      {{16}, {8}, 8, 4, 1, 8, 4},              // save + next block fused: two blocks at once
      {{5, 0}, {300, 2}, 16, 2, 1, 4, 32},     // a long prefill spanning several query tiles
  };
  for (size_t ci = 0; ci < std::size(cases); ++ci) {
    const Case& c = cases[ci];
    const int num_pages = 40;
    const BatchSetup su = make_setup(c, rng, num_pages);
    const RunResult r = run_attention(*backend, c, su, num_pages);
    expect_close(r.out, naive_attention(c, su), 1e-5f, 1e-4f, "attention out");

    // Attention only reads the cache.
    SCOPED_TRACE("case " + std::to_string(ci));
    expect_close(r.k_cache, r.k_given, 0.0f, 0.0f, "k cache");
    expect_close(r.v_cache, r.v_given, 0.0f, 0.0f, "v cache");
  }
}

TEST_F(Attention, LaterBlocksDoNotLeakIntoEarlierQueries) {
  // 8 new tokens at positions 8..15 with block 4: queries of block 2 (positions 8..11) must be
  // unaffected by any change to the K/V of block 3 (positions 12..15); queries of block 3 change.
  const Case c{{8}, {8}, 4, 2, 1, 4, 4};
  const int num_pages = 6;
  const BatchSetup su = make_setup(c, rng, num_pages);
  BatchSetup changed = su;
  const int width = (c.nh + 2 * c.nkv) * c.hd;
  for (int t = 4; t < 8; ++t) {  // rows of positions 12..15: new K and V, same Q
    for (int i = c.nh * c.hd; i < width; ++i) changed.qkv[t * width + i] += 3.0f;
  }
  const RunResult a = run_attention(*backend, c, su, num_pages), b = run_attention(*backend, c, changed, num_pages);
  const int row = c.nh * c.hd;
  for (int i = 0; i < 4 * row; ++i) ASSERT_EQ(a.out[i], b.out[i]) << "block 2 output element " << i;
  int differing = 0;
  for (int i = 4 * row; i < 8 * row; ++i) differing += a.out[i] != b.out[i];
  EXPECT_GT(differing, 0);
  // Without the block mask the earlier queries do see the later block.
  BatchSetup su0 = su, changed0 = changed;
  su0.layout.mask_block = changed0.layout.mask_block = 0;
  const RunResult a0 = run_attention(*backend, c, su0, num_pages), b0 = run_attention(*backend, c, changed0, num_pages);
  EXPECT_NE(a0.out[0], b0.out[0]);
}

TEST_F(Attention, RejectsPagesOutsideTheCache) {
  const Case c{{0}, {3}, 4, 2, 1, 4, 0};
  BatchSetup su = make_setup(c, rng, 2);
  su.layout.page_table[0] = 5;  // only pages 0 and 1 exist
  EXPECT_THROW(run_attention(*backend, c, su, 2), Error);
}
