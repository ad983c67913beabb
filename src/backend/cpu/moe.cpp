// Mixture-of-experts FFN: fp32 routing (MoeRouting: softmax over all experts, or LLaDA2's
// biased, group-limited sigmoid), top-k (ties to the lower expert id), then
// Σ_k weight_k * down_k(silu(gate_k x) * up_k x), plus the shared expert when there is one, with
// fp32 or FP8 expert weights.
// One parallel loop over experts: each runs its GEMM pair over the tokens routed to it and
// writes weighted rows into a per-route buffer; each token then sums its top-k rows in rank
// order, so the result does not depend on the thread count. Weights that hold a run of the
// experts (expert parallelism) leave the other experts' routes at zero.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend_impl.h"
#include "backend/op_checks.h"

namespace jet::cpu {

namespace {

// The first `count` of `ids` by descending key (ties: the lower id first).
void top_by_key(std::vector<int32_t>& ids, int count, const float* key) {
  std::partial_sort(ids.begin(), ids.begin() + count, ids.end(),
                    [&](int32_t a, int32_t b) { return key[a] > key[b] || (key[a] == key[b] && a < b); });
}

// The top_k (expert, weight) choices of one token from its router logits (overwritten with the
// scores).
void route_token(float* logits, int E, int top_k, const MoeRouting& routing, int32_t* experts, float* weights) {
  std::vector<int32_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  if (routing.score == MoeRouting::Score::Softmax) {
    const float max_logit = *std::max_element(logits, logits + E);
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) {
      logits[e] = std::exp(logits[e] - max_logit);
      sum += logits[e];
    }
    for (int e = 0; e < E; ++e) logits[e] /= sum;
    top_by_key(order, top_k, logits);
  } else {
    std::vector<float> biased(E);
    for (int e = 0; e < E; ++e) {
      logits[e] = 1.0f / (1.0f + std::exp(-logits[e]));
      biased[e] = logits[e] + (routing.bias.data ? routing.bias.ptr<float>()[e] : 0.0f);
    }
    // A group scores the sum of its two best biased scores; the topk_group best groups hold the
    // candidates, the others are out.
    const int group_size = E / routing.n_group;
    std::vector<float> group_score(routing.n_group);
    for (int g = 0; g < routing.n_group; ++g) {
      std::vector<float> members(biased.begin() + g * group_size, biased.begin() + (g + 1) * group_size);
      const int best = std::min(2, group_size);
      std::partial_sort(members.begin(), members.begin() + best, members.end(), std::greater<>());
      group_score[g] = std::accumulate(members.begin(), members.begin() + best, 0.0f);
    }
    std::vector<int32_t> groups(routing.n_group);
    std::iota(groups.begin(), groups.end(), 0);
    top_by_key(groups, routing.topk_group, group_score.data());
    order.clear();
    for (int k = 0; k < routing.topk_group; ++k) {
      for (int e = groups[k] * group_size; e < (groups[k] + 1) * group_size; ++e) order.push_back(e);
    }
    top_by_key(order, top_k, biased.data());
  }
  float chosen = 0.0f;
  for (int k = 0; k < top_k; ++k) chosen += logits[order[k]];
  // The sigmoid router's sum gets the reference code's 1e-20, so that all-zero scores stay finite.
  const float denominator = routing.score == MoeRouting::Score::Sigmoid ? chosen + 1e-20f : chosen;
  for (int k = 0; k < top_k; ++k) {
    experts[k] = order[k];
    weights[k] = (routing.renormalize ? logits[order[k]] / denominator : logits[order[k]]) * routing.scaling;
  }
}

// Per-thread buffers of one expert's tokens.
struct ExpertScratch {
  std::vector<float> inputs, gate_up, hidden, outputs;
};

// out += the shared expert of x: down(silu(gate x) * up x), unweighted.
void add_shared_expert(const Tensor& x, const MoeWeights& w, Tensor& out) {
  const int64_t T = x.dim(0), H = x.dim(1), S = w.shared_down.weight.dim(1);
  std::vector<float> gate_up(T * 2 * S), hidden(T * S), shared(T * H);
  const auto product = [&](const float* in, const Linear& l, float* result, int64_t N, int64_t K) {
    if (l.fp8()) {
      gemm_nt_fp8(in, {l.weight.ptr<uint8_t>(), l.scale.ptr<float>(), N, K, l.scaling}, result, T);
    } else {
      gemm_nt(in, l.weight.ptr<float>(), result, T, N, K);
    }
  };
  product(x.ptr<float>(), w.shared_gate_up, gate_up.data(), 2 * S, H);
#pragma omp parallel for num_threads(thread_count())
  for (int64_t t = 0; t < T; ++t) swiglu_row(gate_up.data() + t * 2 * S, hidden.data() + t * S, S);
  product(hidden.data(), w.shared_down, shared.data(), H, S);
  float* out_data = out.ptr<float>();
  for (int64_t i = 0; i < T * H; ++i) out_data[i] += shared[i];
}

}  // namespace

void CpuBackend::moe(const Tensor& x, const MoeWeights& w, Tensor& out) {
  const MoeShape shape = check_moe_args(x, w, out, DType::F32);
  const int64_t T = shape.tokens, H = shape.hidden, E = shape.experts, I = shape.inter;
  const int64_t held = shape.held, expert0 = shape.expert0;
  const int top_k = shape.top_k;

  // Route r = t * top_k + k is token t's k-th choice.
  std::vector<float> router_logits(T * E);
  gemm_nt(x.ptr<float>(), w.router.ptr<float>(), router_logits.data(), T, E, H);
  std::vector<int32_t> experts(T * top_k);
  std::vector<float> weights(T * top_k);
#pragma omp parallel for num_threads(thread_count())
  for (int64_t t = 0; t < T; ++t) {
    route_token(router_logits.data() + t * E, static_cast<int>(E), top_k, w.routing, experts.data() + t * top_k,
                weights.data() + t * top_k);
  }
  // routes_of[e]: the routes of held expert expert0 + e.
  std::vector<std::vector<int64_t>> routes_of(held);
  for (int64_t r = 0; r < T * top_k; ++r) {
    const int64_t e = experts[r] - expert0;
    if (e >= 0 && e < held) routes_of[e].push_back(r);
  }

  const float* x_data = x.ptr<float>();
  std::vector<float> route_out(T * top_k * H);  // weight * expert output, per route (0: not held)
#pragma omp parallel num_threads(thread_count())
  {
    ExpertScratch sc;
#pragma omp for schedule(dynamic, 1)
    for (int64_t e = 0; e < held; ++e) {
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
  if (w.shared_down.weight.data) add_shared_expert(x, w, out);
}

}  // namespace jet::cpu
