// Mixture-of-experts FFN: fp32 router softmax over all experts, top-k (ties to the lower expert
// id), optional renormalisation, then each expert runs as one GEMM pair over the tokens routed
// to it and adds its weighted output to theirs.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend_impl.h"

namespace jet::cpu {

namespace {

struct Route {
  int32_t token = 0;
  float weight = 0.0f;
};

// The top_k (expert, weight) choices of one token from its router logits (overwritten).
void route_token(float* logits, int E, int top_k, bool renormalize, int32_t* experts, float* weights) {
  const float max_logit = *std::max_element(logits, logits + E);
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) {
    logits[e] = std::exp(logits[e] - max_logit);
    sum += logits[e];
  }
  for (int e = 0; e < E; ++e) logits[e] /= sum;
  std::vector<int32_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  float chosen = 0.0f;
  for (int k = 0; k < top_k; ++k) chosen += logits[order[k]];
  for (int k = 0; k < top_k; ++k) {
    experts[k] = order[k];
    weights[k] = renormalize ? logits[order[k]] / chosen : logits[order[k]];
  }
}

}  // namespace

void CpuBackend::moe(const Tensor& x, const MoeWeights& w, Tensor& out) {
  check_tensor(x, "moe", "x", DType::F32, {-1, -1});
  const int64_t T = x.dim(0), H = x.dim(1);
  check_tensor(w.router, "moe", "router", DType::F32, {-1, H});
  const int64_t E = w.router.dim(0);
  check_tensor(w.gate_up, "moe", "gate_up", DType::F32, {E, -1, H});
  const int64_t I = w.gate_up.dim(1) / 2;
  JET_CHECK(w.gate_up.dim(1) % 2 == 0, "moe: gate_up has an odd row count ", w.gate_up.dim(1));
  check_tensor(w.down, "moe", "down", DType::F32, {E, H, I});
  check_tensor(out, "moe", "out", DType::F32, {T, H});
  const int top_k = w.top_k;
  JET_CHECK(top_k >= 1 && top_k <= E, "moe: top_k ", top_k, " must be in [1, ", E, " experts]");

  std::vector<float> router_logits(T * E);
  gemm_nt(x.ptr<float>(), w.router.ptr<float>(), router_logits.data(), T, E, H);
  std::vector<int32_t> experts(T * top_k);
  std::vector<float> weights(T * top_k);
#pragma omp parallel for num_threads(thread_count())
  for (int64_t t = 0; t < T; ++t) {
    route_token(router_logits.data() + t * E, static_cast<int>(E), top_k, w.renormalize, experts.data() + t * top_k,
                weights.data() + t * top_k);
  }

  std::vector<std::vector<Route>> routes(E);
  for (int64_t i = 0; i < T * top_k; ++i) routes[experts[i]].push_back({static_cast<int32_t>(i / top_k), weights[i]});

  const float* x_data = x.ptr<float>();
  float* out_data = out.ptr<float>();
  std::fill(out_data, out_data + T * H, 0.0f);
  std::vector<float> inputs, gate_up, hidden, outputs;
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<Route>& r = routes[e];
    const int64_t n = static_cast<int64_t>(r.size());
    if (n == 0) continue;
    inputs.resize(n * H);
    gate_up.resize(n * 2 * I);
    hidden.resize(n * I);
    outputs.resize(n * H);
    for (int64_t i = 0; i < n; ++i) std::copy_n(x_data + r[i].token * H, H, inputs.data() + i * H);
    gemm_nt(inputs.data(), w.gate_up.ptr<float>() + e * 2 * I * H, gate_up.data(), n, 2 * I, H);
    swiglu_rows(gate_up.data(), hidden.data(), n, I);
    gemm_nt(hidden.data(), w.down.ptr<float>() + e * H * I, outputs.data(), n, H, I);
    // A token appears at most once per expert, so these rows are distinct.
#pragma omp parallel for num_threads(thread_count())
    for (int64_t i = 0; i < n; ++i) {
      float* dst = out_data + r[i].token * H;
      for (int64_t j = 0; j < H; ++j) dst[j] += r[i].weight * outputs[i * H + j];
    }
  }
}

}  // namespace jet::cpu
