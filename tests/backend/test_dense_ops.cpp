// The row-wise CPU ops against naive loops on odd shapes: matmul, rmsnorm, add_rmsnorm,
// qk_norm_rope, swiglu, embedding, plus their argument checks.
#include <gtest/gtest.h>

#include <cmath>

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

ForwardBatch one_sequence_batch(Backend& be, std::vector<Buffer>& owner, const std::vector<int32_t>& positions) {
  ForwardBatch batch;
  batch.host.num_seqs = 1;
  batch.host.num_tokens = static_cast<int>(positions.size());
  batch.host.max_pages = 1;
  batch.host.positions = positions;
  batch.host.seq_starts = {0, batch.host.num_tokens};
  batch.host.cached_lens = {0};
  batch.host.page_table = {0};
  be.upload_batch(batch, owner);
  return batch;
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

TEST_F(DenseOps, QkNormRopeMatchesTheRotateHalfFormula) {
  const int T = 5, nh = 3, nkv = 1, hd = 8, width = (nh + 2 * nkv) * hd;
  const float eps = 1e-6f, theta = 10000.0f;
  const std::vector<int32_t> positions = {0, 1, 7, 33, 1000};
  const auto qkv = random_floats(rng, T * width), qn = random_floats(rng, hd, 0.5f, 1.5f),
             kn = random_floats(rng, hd, 0.5f, 1.5f);
  std::vector<Buffer> owner;
  const ForwardBatch batch = one_sequence_batch(*backend, owner, positions);
  Tensor data = tf.f32({T, width}, qkv);
  backend->qk_norm_rope(data, tf.f32({hd}, qn), tf.f32({hd}, kn), eps, batch, theta, nh, nkv, hd);

  std::vector<float> expected = qkv;
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
  // fp32 angles drift from float64 by ~position * 1e-7 rad.
  expect_close(tf.read<float>(data), expected, 2e-4f, 1e-4f, "qk_norm_rope");
}

TEST_F(DenseOps, RopeAtPositionZeroOnlyNormsAndVIsUntouched) {
  const int T = 1, nh = 2, nkv = 1, hd = 6, width = (nh + 2 * nkv) * hd;
  const auto qkv = random_floats(rng, width);
  std::vector<Buffer> owner;
  const ForwardBatch batch = one_sequence_batch(*backend, owner, {0});
  Tensor data = tf.f32({T, width}, qkv);
  backend->qk_norm_rope(data, Tensor(), Tensor(), 1e-6f, batch, 1e6f, nh, nkv, hd);  // no q/k norm
  expect_close(tf.read<float>(data), qkv, 0.0f, 0.0f, "rope at position 0");
}

TEST_F(DenseOps, RotateHalfPairsIWithIPlusHalf) {
  // hd = 4, theta = 1: inv_freq = {1, 1}, so position p rotates both pairs (0,2) and (1,3) by p.
  const int hd = 4, width = 3 * hd;
  std::vector<float> qkv(width, 0.0f);
  qkv[0] = 1.0f;  // q = e0
  std::vector<Buffer> owner;
  const ForwardBatch batch = one_sequence_batch(*backend, owner, {1});
  Tensor data = tf.f32({1, width}, qkv);
  backend->qk_norm_rope(data, Tensor(), Tensor(), 1e-6f, batch, 1.0f, 1, 1, hd);
  const auto q = tf.read<float>(data);
  EXPECT_NEAR(q[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(q[2], std::sin(1.0), 1e-6);  // e0 rotates into dimension 0 + hd/2
  EXPECT_EQ(q[1], 0.0f);
  EXPECT_EQ(q[3], 0.0f);
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
