// The MoE op against a naive per-token loop (softmax over all experts, top-k with ties to the
// lower expert id, optional renormalisation, Σ weight * down(silu(gate x) * up x)).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend_test_util.h"

using namespace jet;
using namespace jet::test;

namespace {

struct MoeHost {
  int T, H, E, I, top_k;
  bool renormalize;
  std::vector<float> x, router, gate_up, down;
};

std::vector<float> naive_moe(const MoeHost& m) {
  std::vector<float> out(m.T * m.H, 0.0f);
  for (int t = 0; t < m.T; ++t) {
    const float* x = m.x.data() + t * m.H;
    std::vector<double> p(m.E);
    for (int e = 0; e < m.E; ++e) {
      double dot = 0.0;
      for (int h = 0; h < m.H; ++h) dot += double{x[h]} * m.router[e * m.H + h];
      p[e] = dot;
    }
    const double mx = *std::max_element(p.begin(), p.end());
    double z = 0.0;
    for (double& v : p) z += v = std::exp(v - mx);
    for (double& v : p) v /= z;
    std::vector<int> order(m.E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    double chosen = 0.0;
    for (int k = 0; k < m.top_k; ++k) chosen += p[order[k]];
    for (int k = 0; k < m.top_k; ++k) {
      const int e = order[k];
      const double weight = m.renormalize ? p[e] / chosen : p[e];
      std::vector<double> act(m.I);
      for (int i = 0; i < m.I; ++i) {
        double g = 0.0, u = 0.0;
        for (int h = 0; h < m.H; ++h) {
          g += double{x[h]} * m.gate_up[(size_t(e) * 2 * m.I + i) * m.H + h];
          u += double{x[h]} * m.gate_up[(size_t(e) * 2 * m.I + m.I + i) * m.H + h];
        }
        act[i] = g / (1.0 + std::exp(-g)) * u;
      }
      for (int h = 0; h < m.H; ++h) {
        double y = 0.0;
        for (int i = 0; i < m.I; ++i) y += act[i] * m.down[(size_t(e) * m.H + h) * m.I + i];
        out[t * m.H + h] += static_cast<float>(weight * y);
      }
    }
  }
  return out;
}

MoeHost random_moe(std::mt19937& rng, int T, int H, int E, int I, int top_k, bool renormalize) {
  MoeHost m{T, H, E, I, top_k, renormalize, {}, {}, {}, {}};
  m.x = random_floats(rng, T * H);
  m.router = random_floats(rng, E * H);
  m.gate_up = random_floats(rng, size_t(E) * 2 * I * H);
  m.down = random_floats(rng, size_t(E) * H * I);
  return m;
}

std::vector<float> run_moe(Backend& be, const MoeHost& m) {
  TensorFactory tf(be);
  MoeWeights w;
  w.router = tf.f32({m.E, m.H}, m.router);
  w.gate_up = tf.f32({m.E, 2 * m.I, m.H}, m.gate_up);
  w.down = tf.f32({m.E, m.H, m.I}, m.down);
  w.top_k = m.top_k;
  w.renormalize = m.renormalize;
  Tensor out = tf.poisoned({m.T, m.H});
  be.moe(tf.f32({m.T, m.H}, m.x), w, out);
  return tf.read<float>(out);
}

}  // namespace

TEST(Moe, MatchesNaivePerTokenLoop) {
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  std::mt19937 rng(3);
  for (bool renormalize : {true, false}) {
    for (int top_k : {1, 2, 5}) {
      const MoeHost m = random_moe(rng, 7, 12, 5, 6, top_k, renormalize);
      expect_close(run_moe(*backend, m), naive_moe(m), 1e-5f, 1e-4f, "moe");
    }
  }
}

TEST(Moe, RouterTiesGoToTheLowerExpert) {
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  std::mt19937 rng(4);
  MoeHost m = random_moe(rng, 3, 8, 4, 5, 1, true);
  // Every token has feature 0 equal to 1 and only feature 0 reaches the router: experts 1 and 3
  // get logit 5, experts 0 and 2 logit -5, so every token ties between 1 and 3.
  std::fill(m.router.begin(), m.router.end(), 0.0f);
  for (int e = 0; e < m.E; ++e) m.router[e * m.H] = e % 2 == 1 ? 5.0f : -5.0f;
  for (int t = 0; t < m.T; ++t) m.x[t * m.H] = 1.0f;
  const std::vector<float> out = run_moe(*backend, m);
  expect_close(out, naive_moe(m), 1e-5f, 1e-4f, "moe with ties");
  MoeHost only_three = m;  // the same weights with expert 1 replaced by expert 3's
  std::copy_n(m.gate_up.begin() + 3 * 2 * m.I * m.H, 2 * m.I * m.H, only_three.gate_up.begin() + 1 * 2 * m.I * m.H);
  std::copy_n(m.down.begin() + 3 * m.H * m.I, m.H * m.I, only_three.down.begin() + 1 * m.H * m.I);
  EXPECT_NE(run_moe(*backend, only_three), out);  // so the output above really was expert 1's
}

TEST(Moe, RejectsTopKLargerThanTheExpertCount) {
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  std::mt19937 rng(5);
  EXPECT_THROW(run_moe(*backend, random_moe(rng, 2, 4, 3, 2, 4, true)), Error);
}
