// Mixture-of-experts FFN: fp32 router softmax over all experts, top-k (ties to the lower expert
// id), optional renormalisation, then Σ_k weight_k * down_k(silu(gate_k x) * up_k x), with
// fp32 or FP8 expert weights.
// One parallel loop over experts: each runs its GEMM pair over the tokens routed to it and
// writes weighted rows into a per-route buffer; each token then sums its top-k rows in rank
// order, so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend_impl.h"
#include "backend/op_checks.h"

namespace jet::cpu {

namespace {

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
  std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  float chosen = 0.0f;
  for (int k = 0; k < top_k; ++k) chosen += logits[order[k]];
  for (int k = 0; k < top_k; ++k) {
    experts[k] = order[k];
    weights[k] = renormalize ? logits[order[k]] / chosen : logits[order[k]];
  }
}

// Per-thread buffers of one expert's tokens.
struct ExpertScratch {
  std::vector<float> inputs, gate_up, hidden, outputs;
};

}  // namespace

void CpuBackend::moe(const Tensor& x, const MoeWeights& w, Tensor& out) {
  const MoeShape shape = check_moe_args(x, w, out, DType::F32);
  const int64_t T = shape.tokens, H = shape.hidden, E = shape.experts, I = shape.inter;
  const int top_k = shape.top_k;

  // Route r = t * top_k + k is token t's k-th choice.
  std::vector<float> router_logits(T * E);
  gemm_nt(x.ptr<float>(), w.router.ptr<float>(), router_logits.data(), T, E, H);
  std::vector<int32_t> experts(T * top_k);
  std::vector<float> weights(T * top_k);
#pragma omp parallel for num_threads(thread_count())
  for (int64_t t = 0; t < T; ++t) {
    route_token(router_logits.data() + t * E, static_cast<int>(E), top_k, w.renormalize, experts.data() + t * top_k,
                weights.data() + t * top_k);
  }
  std::vector<std::vector<int64_t>> routes_of(E);
  for (int64_t r = 0; r < T * top_k; ++r) routes_of[experts[r]].push_back(r);

  const float* x_data = x.ptr<float>();
  std::vector<float> route_out(T * top_k * H);  // weight * expert output, per route
#pragma omp parallel num_threads(thread_count())
  {
    ExpertScratch sc;
#pragma omp for schedule(dynamic, 1)
    for (int64_t e = 0; e < E; ++e) {
      const std::vector<int64_t>& routes = routes_of[e];
      const int64_t n = static_cast<int64_t>(routes.size());
      if (n == 0) continue;
      sc.inputs.resize(n * H);
      sc.gate_up.resize(n * 2 * I);
      sc.hidden.resize(n * I);
      sc.outputs.resize(n * H);
      for (int64_t i = 0; i < n; ++i) std::copy_n(x_data + routes[i] / top_k * H, H, sc.inputs.data() + i * H);
      if (w.gate_up.fp8()) {
        gemm_nt_fp8(sc.inputs.data(), expert_matrix(w.gate_up, e), sc.gate_up.data(), n);
      } else {
        gemm_nt(sc.inputs.data(), w.gate_up.weight.ptr<float>() + e * 2 * I * H, sc.gate_up.data(), n, 2 * I, H);
      }
      for (int64_t i = 0; i < n; ++i) swiglu_row(sc.gate_up.data() + i * 2 * I, sc.hidden.data() + i * I, I);
      if (w.down.fp8()) {
        gemm_nt_fp8(sc.hidden.data(), expert_matrix(w.down, e), sc.outputs.data(), n);
      } else {
        gemm_nt(sc.hidden.data(), w.down.weight.ptr<float>() + e * H * I, sc.outputs.data(), n, H, I);
      }
      for (int64_t i = 0; i < n; ++i) {
        const float weight = weights[routes[i]];
        float* dst = route_out.data() + routes[i] * H;
        for (int64_t j = 0; j < H; ++j) dst[j] = weight * sc.outputs[i * H + j];
      }
    }
  }

  float* out_data = out.ptr<float>();
#pragma omp parallel for num_threads(thread_count())
  for (int64_t t = 0; t < T; ++t) {
    float* dst = out_data + t * H;
    std::copy_n(route_out.data() + t * top_k * H, H, dst);
    for (int k = 1; k < top_k; ++k) {
      const float* src = route_out.data() + (t * top_k + k) * H;
      for (int64_t j = 0; j < H; ++j) dst[j] += src[j];
    }
  }
}

}  // namespace jet::cpu
