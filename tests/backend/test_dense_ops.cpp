// The row-wise CPU ops against naive loops on odd shapes: matmul, rmsnorm, add_rmsnorm,
// qk_norm_rope, swiglu, embedding, plus their argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "backend_test_util.h"

using namespace jet;
using namespace jet::test;

namespace {

class DenseOps : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  TensorFactory tf{*backend};
  std::mt19937 rng{42};
};

std::vector<float> naive_rmsnorm(const std::vector<float>& x, const std::vector<float>& w, float eps, int T, int H) {
  std::vector<float> out(x.size());
  for (int t = 0; t < T; ++t) {
    double ss = 0.0;
    for (int i = 0; i < H; ++i) ss += double{x[t * H + i]} * x[t * H + i];
    const double scale = 1.0 / std::sqrt(ss / H + eps);
    for (int i = 0; i < H; ++i) out[t * H + i] = static_cast<float>(x[t * H + i] * scale * w[i]);
  }
  return out;
}

// One sequence whose new tokens sit at `positions`, over a K/V cache layer of one page that holds
// every position (so a token's cache row is its position), poisoned before the op.
struct RopeBatch {
  ForwardBatch batch;
  std::vector<Buffer> owner;
  Tensor k_cache, v_cache;
};

RopeBatch rope_batch(Backend& be, TensorFactory& tf, const std::vector<int32_t>& positions, int nkv, int hd) {
  RopeBatch r;
  const int T = static_cast<int>(positions.size());
  const int keys = *std::max_element(positions.begin(), positions.end()) + 1;
  BatchLayout& h = r.batch.host;
  h.num_seqs = 1;
  h.num_tokens = T;
  h.max_pages = 1;
  h.positions = positions;
  h.seq_starts = {0, T};
  h.cached_lens = {keys - T};
  h.page_table = {0};
  be.upload_batch(r.batch, r.owner);
  r.k_cache = tf.poisoned({1, keys, nkv, hd});
  r.v_cache = tf.poisoned({1, keys, nkv, hd});
  return r;
}

// Row `position` of a one-page cache layer.
std::vector<float> cache_row(const std::vector<float>& cache, int position, int row_width) {
  return {cache.begin() + int64_t{position} * row_width, cache.begin() + int64_t{position + 1} * row_width};
}

}  // namespace

TEST_F(DenseOps, MatmulMatchesNaiveProduct) {
  // Small, then large enough to be split over threads by columns (N >= M) and by rows (M > N).
  for (auto [M, N, K] : {std::tuple{7, 13, 11}, std::tuple{3, 1001, 97}, std::tuple{601, 5, 97}}) {
    const auto x = random_floats(rng, M * K), w = random_floats(rng, N * K);
    Tensor out = tf.poisoned({M, N});
    backend->matmul(tf.f32({M, K}, x), tf.f32({N, K}, w), out);
    std::vector<float> expected(M * N);
    for (int m = 0; m < M; ++m) {
      for (int n = 0; n < N; ++n) {
        double acc = 0.0;
        for (int k = 0; k < K; ++k) acc += double{x[m * K + k]} * w[n * K + k];
        expected[m * N + n] = static_cast<float>(acc);
      }
    }
    expect_close(tf.read<float>(out), expected, 1e-5f, 1e-5f, "matmul");
  }
}

TEST_F(DenseOps, MatmulRejectsMismatchedShapes) {
  Tensor out = tf.poisoned({3, 4});
  EXPECT_THROW(backend->matmul(tf.poisoned({3, 5}), tf.poisoned({4, 6}), out), Error);
  EXPECT_THROW(backend->matmul(tf.poisoned({3, 5}), tf.poisoned({5, 5}), out), Error);
}

TEST_F(DenseOps, RmsnormAndAddRmsnorm) {
  const int T = 7, H = 40;
  const float eps = 1e-6f;
  const auto x = random_floats(rng, T * H), w = random_floats(rng, H, 0.5f, 1.5f), r = random_floats(rng, T * H);
  Tensor out = tf.poisoned({T, H});
  backend->rmsnorm(tf.f32({T, H}, x), tf.f32({H}, w), eps, out);
  expect_close(tf.read<float>(out), naive_rmsnorm(x, w, eps, T, H), 1e-5f, 1e-5f, "rmsnorm");

  Tensor residual = tf.f32({T, H}, r);
  Tensor out2 = tf.poisoned({T, H});
  backend->add_rmsnorm(residual, tf.f32({T, H}, x), tf.f32({H}, w), eps, out2);
  std::vector<float> sum(T * H);
  for (int i = 0; i < T * H; ++i) sum[i] = r[i] + x[i];
  expect_close(tf.read<float>(residual), sum, 0.0f, 0.0f, "add_rmsnorm residual");
  expect_close(tf.read<float>(out2), naive_rmsnorm(sum, w, eps, T, H), 1e-5f, 1e-5f, "add_rmsnorm out");
}

TEST_F(DenseOps, QkNormRopeMatchesTheRotateHalfFormulaAndFillsTheCache) {
  const int T = 5, nh = 3, nkv = 1, hd = 8, width = (nh + 2 * nkv) * hd, kv_width = nkv * hd;
  const float eps = 1e-6f, theta = 10000.0f;
  const std::vector<int32_t> positions = {0, 1, 7, 33, 1000};
  const auto qkv = random_floats(rng, T * width), qn = random_floats(rng, hd, 0.5f, 1.5f),
             kn = random_floats(rng, hd, 0.5f, 1.5f), bias = random_floats(rng, width);
  RopeBatch r = rope_batch(*backend, tf, positions, nkv, hd);
  const int page_size = static_cast<int>(r.k_cache.dim(1));
  Tensor data = tf.f32({T, width}, qkv);
  backend->qk_norm_rope(data, tf.f32({width}, bias), tf.f32({hd}, qn), tf.f32({hd}, kn), eps, r.batch, theta, nh, nkv,
                        hd, r.k_cache, r.v_cache, page_size);

  std::vector<float> biased = qkv;  // the bias first, then q rotated in place, k as it will be in the cache
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < width; ++i) biased[t * width + i] += bias[i];
  }
  std::vector<float> expected = biased;
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < nh + nkv; ++h) {
      float* head = expected.data() + t * width + h * hd;
      const std::vector<float> normed = naive_rmsnorm({head, head + hd}, h < nh ? qn : kn, eps, 1, hd);
      for (int i = 0; i < hd / 2; ++i) {  // x'_i = x_i cos - x_{i+hd/2} sin; x'_{i+hd/2} = x_{i+hd/2} cos + x_i sin
        const double angle = positions[t] * std::pow(double{theta}, -2.0 * i / hd);
        head[i] = static_cast<float>(normed[i] * std::cos(angle) - normed[i + hd / 2] * std::sin(angle));
        head[i + hd / 2] = static_cast<float>(normed[i + hd / 2] * std::cos(angle) + normed[i] * std::sin(angle));
      }
    }
  }
  const auto out = tf.read<float>(data), k_cache = tf.read<float>(r.k_cache), v_cache = tf.read<float>(r.v_cache);
  for (int t = 0; t < T; ++t) {
    const auto row = [&](const std::vector<float>& m, int from, int count) {
      return std::vector<float>(m.begin() + t * width + from, m.begin() + t * width + from + count);
    };
    SCOPED_TRACE("token " + std::to_string(t));
    // fp32 angles drift from float64 by ~position * 1e-7 rad.
    expect_close(row(out, 0, nh * hd), row(expected, 0, nh * hd), 2e-4f, 1e-4f, "q");
    expect_close(cache_row(k_cache, positions[t], kv_width), row(expected, nh * hd, kv_width), 2e-4f, 1e-4f,
                 "cached k");
    expect_close(cache_row(v_cache, positions[t], kv_width), row(biased, nh * hd + kv_width, kv_width), 0.0f, 0.0f,
                 "cached v");
    expect_close(row(out, nh * hd, 2 * kv_width), row(qkv, nh * hd, 2 * kv_width), 0.0f, 0.0f, "qkv's k and v");
  }
}

TEST_F(DenseOps, RopeAtPositionZeroOnlyNormsAndVIsUntouched) {
  const int nh = 2, nkv = 1, hd = 6, width = (nh + 2 * nkv) * hd;
  const auto qkv = random_floats(rng, width);
  RopeBatch r = rope_batch(*backend, tf, {0}, nkv, hd);
  Tensor data = tf.f32({1, width}, qkv);
  backend->qk_norm_rope(data, Tensor(), Tensor(), Tensor(), 1e-6f, r.batch, 1e6f, nh, nkv, hd, r.k_cache, r.v_cache, 1);
  expect_close(tf.read<float>(data), qkv, 0.0f, 0.0f, "rope at position 0");
  const std::vector<float> k_and_v(qkv.begin() + nh * hd, qkv.end());
  std::vector<float> cached = tf.read<float>(r.k_cache);
  const auto v = tf.read<float>(r.v_cache);
  cached.insert(cached.end(), v.begin(), v.end());
  expect_close(cached, k_and_v, 0.0f, 0.0f, "cached k and v at position 0");
}

TEST_F(DenseOps, RotateHalfPairsIWithIPlusHalf) {
  // hd = 4, theta = 1: inv_freq = {1, 1}, so position p rotates both pairs (0,2) and (1,3) by p.
  const int hd = 4, width = 3 * hd;
  std::vector<float> qkv(width, 0.0f);
  qkv[0] = 1.0f;  // q = e0
  RopeBatch r = rope_batch(*backend, tf, {1}, 1, hd);
  Tensor data = tf.f32({1, width}, qkv);
  backend->qk_norm_rope(data, Tensor(), Tensor(), Tensor(), 1e-6f, r.batch, 1.0f, 1, 1, hd, r.k_cache, r.v_cache, 2);
  const auto q = tf.read<float>(data);
  EXPECT_NEAR(q[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(q[2], std::sin(1.0), 1e-6);  // e0 rotates into dimension 0 + hd/2
  EXPECT_EQ(q[1], 0.0f);
  EXPECT_EQ(q[3], 0.0f);
}

TEST_F(DenseOps, QkNormRopeRejectsAPositionOutsideItsPages) {
  const int hd = 4, width = 3 * hd;
  RopeBatch r = rope_batch(*backend, tf, {0, 1}, 1, hd);
  r.batch.host.positions[1] = 2;  // past the sequence's 2 keys
  Tensor data = tf.f32({2, width}, std::vector<float>(2 * width, 0.0f));
  EXPECT_THROW(backend->qk_norm_rope(data, Tensor(), Tensor(), Tensor(), 1e-6f, r.batch, 1.0f, 1, 1, hd, r.k_cache,
                                     r.v_cache, 2),
               Error);
  Tensor small_cache = tf.poisoned({1, 1, 1, hd});
  EXPECT_THROW(backend->qk_norm_rope(data, Tensor(), Tensor(), Tensor(), 1e-6f, r.batch, 1.0f, 1, 1, hd, small_cache,
                                     r.v_cache, 2),
               Error);
}

TEST_F(DenseOps, SwigluAndEmbedding) {
  const int T = 7, I = 9, rows = 11, H = 5;
  const auto gate_up = random_floats(rng, T * 2 * I, -4.0f, 4.0f);
  Tensor out = tf.poisoned({T, I});
  backend->swiglu(tf.f32({T, 2 * I}, gate_up), out);
  std::vector<float> expected(T * I);
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < I; ++i) {
      const double g = gate_up[t * 2 * I + i], u = gate_up[t * 2 * I + I + i];
      expected[t * I + i] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
    }
  }
  expect_close(tf.read<float>(out), expected, 1e-6f, 1e-5f, "swiglu");

  const auto table = random_floats(rng, rows * H);
  const std::vector<int32_t> ids = {10, 0, 3, 3, 7};
  Tensor emb = tf.poisoned({5, H});
  backend->embedding(tf.i32({5}, ids), tf.f32({rows, H}, table), emb);
  std::vector<float> gathered;
  for (int id : ids) gathered.insert(gathered.end(), table.begin() + id * H, table.begin() + (id + 1) * H);
  expect_close(tf.read<float>(emb), gathered, 0.0f, 0.0f, "embedding");
  Tensor one_row = tf.poisoned({1, H});
  try {
    backend->embedding(tf.i32({1}, {rows}), tf.f32({rows, H}, table), one_row);
    FAIL() << "no error for an id past the table";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 11"), std::string::npos) << e.what();
  }
}

TEST_F(DenseOps, PartialRopeRotatesTheFirstRotaryDimsAndPassesTheRest) {
  // LLaDA2's RoPE: rotary_dim 4 of head_dim 8 pairs i with i + 2 for i < 2, at angles over 4
  // dimensions; dimensions 4..7 pass unchanged, in q and in the cached k.
  const int nh = 2, nkv = 1, hd = 8, rot = 4, width = (nh + 2 * nkv) * hd;
  const float theta = 10000.0f;
  const std::vector<int32_t> positions = {3, 77};
  const auto qkv = random_floats(rng, 2 * width);
  RopeBatch r = rope_batch(*backend, tf, positions, nkv, hd);
  Tensor data = tf.f32({2, width}, qkv);
  backend->qk_norm_rope(data, Tensor(), Tensor(), Tensor(), 1e-6f, r.batch, theta, nh, nkv, hd, r.k_cache, r.v_cache,
                        static_cast<int>(r.k_cache.dim(1)), rot);
  std::vector<float> expected = qkv;
  for (int t = 0; t < 2; ++t) {
    for (int h = 0; h < nh + nkv; ++h) {
      float* head = expected.data() + t * width + h * hd;
      const std::vector<float> x(head, head + hd);
      for (int i = 0; i < rot / 2; ++i) {
        const double angle = positions[t] * std::pow(double{theta}, -2.0 * i / rot);
        head[i] = static_cast<float>(x[i] * std::cos(angle) - x[i + rot / 2] * std::sin(angle));
        head[i + rot / 2] = static_cast<float>(x[i + rot / 2] * std::cos(angle) + x[i] * std::sin(angle));
      }
    }
  }
  const auto out = tf.read<float>(data), k_cache = tf.read<float>(r.k_cache);
  for (int t = 0; t < 2; ++t) {
    const std::vector<float> q(out.begin() + t * width, out.begin() + t * width + nh * hd);
    const std::vector<float> q_want(expected.begin() + t * width, expected.begin() + t * width + nh * hd);
    expect_close(q, q_want, 1e-5f, 1e-5f, "q");
    const std::vector<float> k_want(expected.begin() + t * width + nh * hd,
                                    expected.begin() + t * width + (nh + 1) * hd);
    expect_close(cache_row(k_cache, positions[t], nkv * hd), k_want, 1e-5f, 1e-5f, "cached k");
  }
  EXPECT_THROW(backend->qk_norm_rope(data, Tensor(), Tensor(), Tensor(), 1e-6f, r.batch, theta, nh, nkv, hd, r.k_cache,
                                     r.v_cache, static_cast<int>(r.k_cache.dim(1)), 3),
               Error);  // odd
}
