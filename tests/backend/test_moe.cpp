// The MoE op against a naive per-token loop (softmax over all experts, top-k with ties to the
// lower expert id, optional renormalisation, Σ weight * down(silu(gate x) * up x)), with fp32
// and FP8 experts against the verified FP8 ops composed per expert.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <numeric>

#include "fp8_test_util.h"

using namespace jet;
using namespace jet::test;

namespace {

struct MoeHost {
  int T, H, E, I, top_k;
  bool renormalize;
  std::vector<float> x, router, gate_up, down;
};

// Token t's top_k (expert, routing weight) choices, in rank order.
std::vector<std::pair<int, double>> naive_routes(const MoeHost& m, int t) {
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
  std::vector<std::pair<int, double>> out;
  for (int k = 0; k < m.top_k; ++k) out.emplace_back(order[k], m.renormalize ? p[order[k]] / chosen : p[order[k]]);
  return out;
}

std::vector<float> naive_moe(const MoeHost& m) {
  std::vector<float> out(m.T * m.H, 0.0f);
  for (int t = 0; t < m.T; ++t) {
    const float* x = m.x.data() + t * m.H;
    for (const auto& [e, weight] : naive_routes(m, t)) {
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

// The op's output for m; `more` may set the rest of the weights (tensors from the same factory).
std::vector<float> run_moe(Backend& be, const MoeHost& m,
                           const std::function<void(TensorFactory&, MoeWeights&)>& more = {}) {
  TensorFactory tf(be);
  MoeWeights w;
  w.router = tf.f32({m.E, m.H}, m.router);
  w.gate_up.weight = tf.f32({m.E, 2 * m.I, m.H}, m.gate_up);
  w.down.weight = tf.f32({m.E, m.H, m.I}, m.down);
  w.top_k = m.top_k;
  w.routing.renormalize = m.renormalize;
  if (more) more(tf, w);
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

// Expert parallelism: weights holding a run of the experts give the routes to those experts
// alone (the naive loop over a model whose other experts are zero), and the runs of a split sum
// to the whole op.
TEST(Moe, HeldRunsOfExpertsSumToTheWholeOp) {
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  std::mt19937 rng(6);
  const MoeHost m = random_moe(rng, 9, 12, 6, 5, 3, true);
  const std::vector<float> whole = run_moe(*backend, m);
  for (int runs : {2, 3}) {
    const int held = m.E / runs;
    std::vector<float> sum(whole.size(), 0.0f);
    for (int first = 0; first < m.E; first += held) {
      const auto held_only = [&](TensorFactory& tf, MoeWeights& w) {
        w.gate_up.weight = tf.f32({held, 2 * m.I, m.H}, {m.gate_up.begin() + size_t(first) * 2 * m.I * m.H,
                                                         m.gate_up.begin() + size_t(first + held) * 2 * m.I * m.H});
        w.down.weight = tf.f32({held, m.H, m.I}, {m.down.begin() + size_t(first) * m.H * m.I,
                                                  m.down.begin() + size_t(first + held) * m.H * m.I});
        w.expert0 = first;
      };
      MoeHost others_zero = m;
      for (int e = 0; e < m.E; ++e) {
        if (e >= first && e < first + held) continue;
        std::fill_n(others_zero.gate_up.begin() + size_t(e) * 2 * m.I * m.H, 2 * m.I * m.H, 0.0f);
      }
      const std::vector<float> part = run_moe(*backend, m, held_only);
      SCOPED_TRACE("experts held from " + std::to_string(first) + " in " + std::to_string(runs) + " runs");
      expect_close(part, naive_moe(others_zero), 1e-5f, 1e-4f, "a held run of experts");
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    }
    expect_close(sum, whole, 1e-5f, 1e-4f, "the runs of experts summed");
  }
  const auto past_the_end = [&](TensorFactory& tf, MoeWeights& w) {
    w.gate_up.weight = tf.f32({2, 2 * m.I, m.H}, {m.gate_up.begin(), m.gate_up.begin() + 2 * 2 * m.I * m.H});
    w.down.weight = tf.f32({2, m.H, m.I}, {m.down.begin(), m.down.begin() + 2 * m.H * m.I});
    w.expert0 = 5;
  };
  EXPECT_THROW(run_moe(*backend, m, past_the_end), Error);
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

// FP8 experts: per expert [2I, H] and [H, I] quantized (I = 130 and H = 136 give partial
// 128-blocks). The expected output composes the verified ops (test_fp8_ops.cpp) over each
// expert's routed tokens, in route order as the op gathers them, so that both quantize the same
// fp32 values: matmul_fp8 on the expert's slice of the stacked weights, swiglu, matmul_fp8.
TEST(Moe, Fp8ExpertsEqualTheComposedOps) {
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  std::mt19937 rng(6);
  for (Fp8Scaling scaling : {Fp8Scaling::PerChannel, Fp8Scaling::Block128}) {
    const MoeHost m = random_moe(rng, 9, 136, 5, 130, 2, true);
    TensorFactory tf(*backend);
    std::vector<uint8_t> gate_up_codes, down_codes;
    std::vector<float> gate_up_scales, down_scales;
    const size_t gu = size_t(2) * m.I * m.H, dn = size_t(m.H) * m.I;
    for (int e = 0; e < m.E; ++e) {
      const Fp8Host g =
          quantize_host({m.gate_up.begin() + e * gu, m.gate_up.begin() + (e + 1) * gu}, 2 * m.I, m.H, scaling);
      const Fp8Host d = quantize_host({m.down.begin() + e * dn, m.down.begin() + (e + 1) * dn}, m.H, m.I, scaling);
      gate_up_codes.insert(gate_up_codes.end(), g.codes.begin(), g.codes.end());
      down_codes.insert(down_codes.end(), d.codes.begin(), d.codes.end());
      gate_up_scales.insert(gate_up_scales.end(), g.scales.begin(), g.scales.end());
      down_scales.insert(down_scales.end(), d.scales.begin(), d.scales.end());
    }
    const bool per_channel = scaling == Fp8Scaling::PerChannel;
    const int64_t gu_scales = fp8_scale_count(scaling, 2 * m.I, m.H), dn_scales = fp8_scale_count(scaling, m.H, m.I);
    MoeWeights w;
    w.router = tf.f32({m.E, m.H}, m.router);
    w.gate_up.weight = tf.make(DType::F8E4M3, {m.E, 2 * m.I, m.H}, gate_up_codes);
    w.down.weight = tf.make(DType::F8E4M3, {m.E, m.H, m.I}, down_codes);
    w.gate_up.scale = per_channel ? tf.f32({m.E, 2 * m.I}, gate_up_scales)
                                  : tf.f32({m.E, (2 * m.I + 127) / 128, (m.H + 127) / 128}, gate_up_scales);
    w.down.scale = per_channel ? tf.f32({m.E, m.H}, down_scales)
                               : tf.f32({m.E, (m.H + 127) / 128, (m.I + 127) / 128}, down_scales);
    w.gate_up.scaling = w.down.scaling = scaling;
    w.top_k = m.top_k;
    w.routing.renormalize = m.renormalize;
    Tensor out = tf.poisoned({m.T, m.H});
    backend->moe(tf.f32({m.T, m.H}, m.x), w, out);

    // Expert e's matrices as 2-D Linears: views into the stacked tensors.
    const auto expert = [&](const Linear& stacked, int e, int64_t rows, int64_t cols, int64_t scales) {
      Linear l;
      l.weight = Tensor(stacked.weight.ptr<uint8_t>() + e * rows * cols, DType::F8E4M3, {rows, cols});
      l.scale = per_channel ? Tensor(stacked.scale.ptr<float>() + e * scales, DType::F32, {rows})
                            : Tensor(stacked.scale.ptr<float>() + e * scales, DType::F32,
                                     {(rows + 127) / 128, (cols + 127) / 128});
      l.scaling = scaling;
      return l;
    };
    std::vector<float> want(m.T * m.H, 0.0f);
    std::vector<std::vector<float>> route_out(m.T * m.top_k);
    for (int e = 0; e < m.E; ++e) {
      std::vector<int> routes;  // r = t * top_k + k, in increasing order as the op gathers them
      std::vector<float> rows;
      for (int t = 0; t < m.T; ++t) {
        const std::vector<std::pair<int, double>> chosen = naive_routes(m, t);
        for (int k = 0; k < m.top_k; ++k) {
          if (chosen[k].first != e) continue;
          routes.push_back(t * m.top_k + k);
          rows.insert(rows.end(), m.x.begin() + t * m.H, m.x.begin() + (t + 1) * m.H);
        }
      }
      const int64_t n = static_cast<int64_t>(routes.size());
      if (n == 0) continue;
      Tensor gate_up = tf.poisoned({n, 2 * m.I}), hidden = tf.poisoned({n, m.I}), y = tf.poisoned({n, m.H});
      backend->matmul_fp8(tf.f32({n, m.H}, rows), expert(w.gate_up, e, 2 * m.I, m.H, gu_scales), gate_up);
      backend->swiglu(gate_up, hidden);
      backend->matmul_fp8(hidden, expert(w.down, e, m.H, m.I, dn_scales), y);
      const std::vector<float> ys = tf.read<float>(y);
      for (int64_t i = 0; i < n; ++i) {
        const int r = routes[i];
        const float weight = static_cast<float>(naive_routes(m, r / m.top_k)[r % m.top_k].second);
        route_out[r].resize(m.H);
        for (int h = 0; h < m.H; ++h) route_out[r][h] = weight * ys[i * m.H + h];
      }
    }
    for (int t = 0; t < m.T; ++t) {
      for (int k = 0; k < m.top_k; ++k) {
        for (int h = 0; h < m.H; ++h) want[t * m.H + h] += route_out[t * m.top_k + k][h];
      }
    }
    expect_close(tf.read<float>(out), want, 1e-5f, 1e-4f, "fp8 moe");
  }
}

namespace {

// LLaDA2's routing (MoeRouting::Score::Sigmoid) and shared expert, in double, per token: sigmoid
// scores, the bias added for the choice only, groups scored by their two best biased scores, the
// top_k of the topk_group best groups, unbiased weights renormalised and scaled.
struct SigmoidMoe {
  MoeHost m;
  std::vector<float> bias;
  int n_group, topk_group;
  float scaling;
  int S;  // shared expert width
  std::vector<float> shared_gate_up, shared_down;
};

double silu_times(double g, double u) { return g / (1.0 + std::exp(-g)) * u; }

std::vector<float> naive_sigmoid_moe(const SigmoidMoe& s) {
  const MoeHost& m = s.m;
  std::vector<float> out(m.T * m.H, 0.0f);
  const int group_size = m.E / s.n_group;
  for (int t = 0; t < m.T; ++t) {
    const float* x = m.x.data() + t * m.H;
    std::vector<double> score(m.E), biased(m.E);
    for (int e = 0; e < m.E; ++e) {
      double dot = 0.0;
      for (int h = 0; h < m.H; ++h) dot += double{x[h]} * m.router[e * m.H + h];
      score[e] = 1.0 / (1.0 + std::exp(-dot));
      biased[e] = score[e] + s.bias[e];
    }
    std::vector<double> group_score(s.n_group);
    for (int g = 0; g < s.n_group; ++g) {
      std::vector<double> members(biased.begin() + g * group_size, biased.begin() + (g + 1) * group_size);
      std::sort(members.rbegin(), members.rend());
      group_score[g] = members[0] + (group_size > 1 ? members[1] : 0.0);
    }
    std::vector<int> groups(s.n_group);
    std::iota(groups.begin(), groups.end(), 0);
    std::stable_sort(groups.begin(), groups.end(), [&](int a, int b) { return group_score[a] > group_score[b]; });
    std::vector<int> candidates;
    for (int k = 0; k < s.topk_group; ++k) {
      for (int e = groups[k] * group_size; e < (groups[k] + 1) * group_size; ++e) candidates.push_back(e);
    }
    std::sort(candidates.begin(), candidates.end());
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return biased[a] > biased[b]; });
    double chosen = 0.0;
    for (int k = 0; k < m.top_k; ++k) chosen += score[candidates[k]];
    std::vector<double> y(m.H, 0.0);
    for (int k = 0; k < m.top_k; ++k) {
      const int e = candidates[k];
      const double weight = score[e] / chosen * s.scaling;
      for (int h = 0; h < m.H; ++h) {
        double sum = 0.0;
        for (int i = 0; i < m.I; ++i) {
          double g = 0.0, u = 0.0;
          for (int j = 0; j < m.H; ++j) {
            g += double{x[j]} * m.gate_up[(size_t(e) * 2 * m.I + i) * m.H + j];
            u += double{x[j]} * m.gate_up[(size_t(e) * 2 * m.I + m.I + i) * m.H + j];
          }
          sum += silu_times(g, u) * m.down[(size_t(e) * m.H + h) * m.I + i];
        }
        y[h] += weight * sum;
      }
    }
    for (int h = 0; h < m.H; ++h) {
      double sum = 0.0;
      for (int i = 0; i < s.S; ++i) {
        double g = 0.0, u = 0.0;
        for (int j = 0; j < m.H; ++j) {
          g += double{x[j]} * s.shared_gate_up[size_t(i) * m.H + j];
          u += double{x[j]} * s.shared_gate_up[size_t(s.S + i) * m.H + j];
        }
        sum += silu_times(g, u) * s.shared_down[size_t(h) * s.S + i];
      }
      out[t * m.H + h] = static_cast<float>(y[h] + sum);
    }
  }
  return out;
}

std::vector<float> run_sigmoid_moe(Backend& be, const SigmoidMoe& s) {
  return run_moe(be, s.m, [&](TensorFactory& tf, MoeWeights& w) {
    w.routing.score = MoeRouting::Score::Sigmoid;
    w.routing.bias = tf.f32({s.m.E}, s.bias);
    w.routing.n_group = s.n_group;
    w.routing.topk_group = s.topk_group;
    w.routing.scaling = s.scaling;
    w.shared_gate_up.weight = tf.f32({2 * s.S, s.m.H}, s.shared_gate_up);
    w.shared_down.weight = tf.f32({s.m.H, s.S}, s.shared_down);
  });
}

}  // namespace

TEST(Moe, Llada2SigmoidGroupRoutingAndSharedExpertMatchNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  std::mt19937 rng(11);
  // (experts, groups, kept groups, top_k): LLaDA2-mini's 256 / 8 / 4 / 8 in small, one group, and
  // groups of one expert.
  for (auto [E, n_group, topk_group, top_k] : {std::array<int, 4>{8, 4, 2, 2}, std::array<int, 4>{6, 1, 1, 3},
                                               std::array<int, 4>{4, 4, 2, 2}, std::array<int, 4>{12, 3, 2, 1}}) {
    SigmoidMoe s{random_moe(rng, 9, 10, E, 5, top_k, true),
                 random_floats(rng, E, -0.3f, 0.3f),
                 n_group,
                 topk_group,
                 2.5f,
                 7,
                 {},
                 {}};
    s.shared_gate_up = random_floats(rng, 2 * s.S * 10);
    s.shared_down = random_floats(rng, 10 * s.S);
    expect_close(run_sigmoid_moe(*backend, s), naive_sigmoid_moe(s), 1e-5f, 1e-4f, "sigmoid moe");
  }
}

TEST(Moe, Llada2BiasChoosesButDoesNotWeigh) {
  // A bias of +10 on expert 2 puts it first for every token; with top_k = 1 its weight is then the
  // scaling alone (its own score renormalised), whatever its score; without a shared expert the
  // output is that expert's, times 2.5.
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  std::mt19937 rng(12);
  SigmoidMoe s{random_moe(rng, 5, 6, 4, 3, 1, true), {0.0f, 0.0f, 10.0f, 0.0f}, 1, 1, 2.5f, 1, {}, {}};
  s.shared_gate_up.assign(2 * 6, 0.0f);  // a shared expert of zeros adds nothing
  s.shared_down.assign(6, 0.0f);
  MoeHost only_two = s.m;  // expert 2 alone: the softmax gives it weight 1
  only_two.E = 1;
  only_two.router.assign(6, 0.0f);
  only_two.gate_up.assign(s.m.gate_up.begin() + 2 * (2 * 3 * 6), s.m.gate_up.begin() + 3 * (2 * 3 * 6));
  only_two.down.assign(s.m.down.begin() + 2 * (6 * 3), s.m.down.begin() + 3 * (6 * 3));
  std::vector<float> want = naive_moe(only_two);
  for (float& v : want) v *= 2.5f;
  expect_close(run_sigmoid_moe(*backend, s), want, 1e-5f, 1e-4f, "biased choice");
}
