// matmul_fp8 (backend.h) against the FP8 rule written out in double precision: x quantized per
// row (or per row and 128 columns), w by quantize_e4m3_matrix, their read-back values
// multiplied. Shapes with partial 128-blocks in both dimensions, one row, one column.
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
