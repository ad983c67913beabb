// matmul_fp8 (backend.h) against the FP8 rule written out in double precision: x quantized per
// row (or per row and 128 columns), w by quantize_e4m3_matrix, their read-back values
// multiplied. Shapes with partial 128-blocks in both dimensions, one row, one column. The FP8 row
// ops (rmsnorm_fp8, add_rmsnorm_fp8, swiglu_fp8, matmul_fp8_rows) against the ops they fuse.
#include <gtest/gtest.h>

#include "fp8_test_util.h"

using namespace jet;
using namespace jet::test;

namespace {

struct Case {
  int64_t m, n, k;
};

std::vector<float> run_matmul_fp8(Backend& be, const std::vector<float>& x, const Fp8Host& w, Case c,
                                  Fp8Scaling scaling) {
  TensorFactory tf(be);
  Linear linear;
  linear.weight = tf.make(DType::F8E4M3, {c.n, c.k}, w.codes);
  linear.scale = scaling == Fp8Scaling::PerChannel ? tf.f32({c.n}, w.scales)
                                                   : tf.f32({(c.n + 127) / 128, (c.k + 127) / 128}, w.scales);
  linear.scaling = scaling;
  Tensor out = tf.poisoned({c.m, c.n});
  be.matmul_fp8(tf.f32({c.m, c.k}, x), linear, out);
  return tf.read<float>(out);
}

// out[r, n] = Σ_k a[r, k] b[n, k] in double.
std::vector<float> product(const std::vector<float>& a, const std::vector<float>& b, Case c) {
  std::vector<float> out(c.m * c.n);
  for (int64_t r = 0; r < c.m; ++r) {
    for (int64_t n = 0; n < c.n; ++n) {
      double sum = 0.0;
      for (int64_t k = 0; k < c.k; ++k) sum += double{a[r * c.k + k]} * b[n * c.k + k];
      out[r * c.n + n] = static_cast<float>(sum);
    }
  }
  return out;
}

float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

}  // namespace

TEST(Fp8Ops, MatmulMatchesTheRuleForBothScalings) {
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  std::mt19937 rng(11);
  for (Fp8Scaling scaling : {Fp8Scaling::PerChannel, Fp8Scaling::Block128}) {
    for (Case c : {Case{1, 1, 1}, Case{5, 130, 300}, Case{33, 257, 128}, Case{2, 64, 129}}) {
      SCOPED_TRACE(testing::Message() << "scaling " << int(scaling) << " m " << c.m << " n " << c.n << " k " << c.k);
      std::vector<float> x = random_floats(rng, c.m * c.k, -3.0f, 3.0f);
      const std::vector<float> w = random_floats(rng, c.n * c.k);
      if (c.m > 1) std::fill(x.begin(), x.begin() + c.k, 0.0f);  // an all-zero row: scale 1, output 0
      const Fp8Host q = quantize_host(w, c.n, c.k, scaling);
      const std::vector<float> want =
          product(fake_quantize_rows(x, c.m, c.k, activation_group(scaling, c.k)), q.values, c);
      const std::vector<float> got = run_matmul_fp8(*backend, x, q, c, scaling);
      const float scale = max_abs(want);
      expect_close(got, want, 1e-6f * scale, 1e-5f, "matmul_fp8");
      if (c.m > 1) {
        for (int64_t n = 0; n < c.n; ++n) EXPECT_EQ(got[n], 0.0f);
      }
      // The rule is not the float product: FP8 moves it by far more than the tolerance above.
      if (c.k > 1) {
        const std::vector<float> exact = product(x, w, c);
        float moved = 0.0f;
        for (size_t i = 0; i < exact.size(); ++i) moved = std::max(moved, std::fabs(exact[i] - want[i]));
        EXPECT_GT(moved, 1e-3f * scale);
      }
    }
  }
}

TEST(Fp8Ops, MatmulRejectsScalesOfTheWrongShape) {
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  TensorFactory tf(*backend);
  Linear w;
  w.weight = tf.make(DType::F8E4M3, {4, 8}, std::vector<uint8_t>(32, 0x38));
  w.scale = tf.f32({3}, {1, 1, 1});
  Tensor out = tf.poisoned({2, 4});
  try {
    backend->matmul_fp8(tf.f32({2, 8}, std::vector<float>(16, 1.0f)), w, out);
    FAIL() << "a scale of 3 for 4 rows was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul_fp8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("w scale"), std::string::npos) << e.what();
  }
  w.scale = tf.f32({4}, {1, 1, 1, 1});
  w.scaling = Fp8Scaling::Block128;  // wants [1, 1]
  EXPECT_THROW(backend->matmul_fp8(tf.f32({2, 8}, std::vector<float>(16, 1.0f)), w, out), Error);
}

TEST(Fp8Ops, MatmulWritesEveryElementOfALargeProduct) {
  // Enough rows and columns for the CPU backend to split the work over its threads.
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  std::mt19937 rng(12);
  const Case c{70, 300, 260};
  const std::vector<float> x = random_floats(rng, c.m * c.k);
  const Fp8Host q = quantize_host(random_floats(rng, c.n * c.k), c.n, c.k, Fp8Scaling::Block128);
  const std::vector<float> want = product(fake_quantize_rows(x, c.m, c.k, 128), q.values, c);
  expect_close(run_matmul_fp8(*backend, x, q, c, Fp8Scaling::Block128), want, 1e-6f * max_abs(want), 1e-5f,
               "matmul_fp8");
}

// The FP8 row ops (backend.h, Fp8Rows): rmsnorm_fp8, add_rmsnorm_fp8 and swiglu_fp8 then
// matmul_fp8_rows give exactly what rmsnorm, add_rmsnorm and swiglu then matmul_fp8 give (the
// residual updated alike), and their codes and scales are the rule's: each row's values over
// their amax / 448. Rows of one to many columns, an all-zero row.
TEST(Fp8Ops, RowOpsEqualTheOpsThenMatmul) {
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  std::mt19937 rng(13);
  for (Case c : {Case{1, 3, 1}, Case{5, 130, 300}, Case{70, 300, 260}}) {
    SCOPED_TRACE(testing::Message() << "m " << c.m << " n " << c.n << " k " << c.k);
    TensorFactory tf(*backend);
    std::vector<float> x = random_floats(rng, c.m * c.k, -3.0f, 3.0f);
    if (c.m > 1) std::fill(x.begin(), x.begin() + c.k, 0.0f);
    const std::vector<float> delta = random_floats(rng, c.m * c.k), norm = random_floats(rng, c.k, 0.5f, 1.5f);
    const std::vector<float> gate_up = random_floats(rng, c.m * 2 * c.k, -4.0f, 4.0f);
    const Fp8Host q = quantize_host(random_floats(rng, c.n * c.k), c.n, c.k, Fp8Scaling::PerChannel);
    Linear w{tf.make(DType::F8E4M3, {c.n, c.k}, q.codes), tf.f32({c.n}, q.scales), Fp8Scaling::PerChannel};
    const Tensor norm_t = tf.f32({c.k}, norm);
    const float eps = 1e-6f;

    enum class Op { Norm, AddNorm, Swiglu };
    for (Op op : {Op::Norm, Op::AddNorm, Op::Swiglu}) {
      SCOPED_TRACE(testing::Message() << "op " << int(op));
      // Unfused: the op into floats, then matmul_fp8.
      Tensor resid_a = tf.f32({c.m, c.k}, x), values = tf.poisoned({c.m, c.k}), want = tf.poisoned({c.m, c.n});
      // Fused: the op into quantized rows, then matmul_fp8_rows.
      Tensor resid_b = tf.f32({c.m, c.k}, x), got = tf.poisoned({c.m, c.n});
      Fp8Rows rows{tf.make(DType::F8E4M3, {c.m, c.k}, std::vector<uint8_t>(c.m * c.k, 0x7f)), tf.poisoned({c.m})};
      const Tensor delta_t = tf.f32({c.m, c.k}, delta), gate_up_t = tf.f32({c.m, 2 * c.k}, gate_up);
      switch (op) {
        case Op::Norm:
          backend->rmsnorm(resid_a, norm_t, eps, values);
          backend->rmsnorm_fp8(resid_b, norm_t, eps, rows);
          break;
        case Op::AddNorm:
          backend->add_rmsnorm(resid_a, delta_t, norm_t, eps, values);
          backend->add_rmsnorm_fp8(resid_b, delta_t, norm_t, eps, rows);
          break;
        case Op::Swiglu:
          backend->swiglu(gate_up_t, values);
          backend->swiglu_fp8(gate_up_t, rows);
          break;
      }
      backend->matmul_fp8(values, w, want);
      backend->matmul_fp8_rows(rows, w, got);
      EXPECT_EQ(tf.read<float>(got), tf.read<float>(want));
      EXPECT_EQ(tf.read<float>(resid_b), tf.read<float>(resid_a));
      // The codes and scales are the rule applied to the op's own output.
      const std::vector<float> v = tf.read<float>(values), scales = tf.read<float>(rows.scales);
      const std::vector<uint8_t> codes = tf.read<uint8_t>(rows.codes);
      for (int64_t r = 0; r < c.m; ++r) {
        float amax = 0.0f;
        for (int64_t k = 0; k < c.k; ++k) amax = std::max(amax, std::fabs(v[r * c.k + k]));
        ASSERT_EQ(scales[r], e4m3_scale(amax)) << "row " << r;
        for (int64_t k = 0; k < c.k; ++k) ASSERT_EQ(codes[r * c.k + k], f32_to_e4m3(v[r * c.k + k] / scales[r]));
      }
    }
  }
}

TEST(Fp8Ops, RowOpsRejectBadRows) {
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  TensorFactory tf(*backend);
  const Tensor x = tf.f32({2, 8}, std::vector<float>(16, 1.0f)), norm = tf.f32({8}, std::vector<float>(8, 1.0f));
  Fp8Rows short_scales{tf.make(DType::F8E4M3, {2, 8}, std::vector<uint8_t>(16, 0)), tf.poisoned({1})};
  EXPECT_THROW(backend->rmsnorm_fp8(x, norm, 1e-6f, short_scales), Error);
  Fp8Rows narrow{tf.make(DType::F8E4M3, {2, 4}, std::vector<uint8_t>(8, 0)), tf.poisoned({2})};
  EXPECT_THROW(backend->swiglu_fp8(tf.f32({2, 6}, std::vector<float>(12, 1.0f)), narrow), Error);
  // Rows with one scale each cannot feed a weight in 128x128 tiles.
  Linear tiled{tf.make(DType::F8E4M3, {4, 8}, std::vector<uint8_t>(32, 0x38)), tf.f32({1, 1}, {1.0f}),
               Fp8Scaling::Block128};
  Fp8Rows rows{tf.make(DType::F8E4M3, {2, 8}, std::vector<uint8_t>(16, 0x38)), tf.f32({2}, {1.0f, 1.0f})};
  Tensor out = tf.poisoned({2, 4});
  try {
    backend->matmul_fp8_rows(rows, tiled, out);
    FAIL() << "per-row scales against 128x128 tiles were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("per-channel"), std::string::npos) << e.what();
  }
}
