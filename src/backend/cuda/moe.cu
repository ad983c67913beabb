// Mixture-of-experts FFN, correctness first: fp32 router logits through the matmul op, softmax
// and top-k per token (ties to the lower expert id, optional renormalisation), then each
// selected expert's SwiGLU and down projection as warp dot products, and the weighted sum of a
// token's experts in rank order (the CPU op's order). Nothing leaves the device: tokens are not
// grouped per expert on the host, so the op needs no sync. (Grouped expert GEMMs come later.)
#include <cfloat>

#include "backend/cuda/kernel_util.cuh"
#include "backend/op_checks.h"

namespace jet::cuda {

namespace {

constexpr int kThreads = 256;

// Device scratch for one call, in stream order: freed when the op returns, reused by the pool.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, cudaStream_t stream) : stream_(stream) {
    JET_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, stream_));
  }
  ~StreamScratch() { cudaFreeAsync(ptr_, stream_); }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  // Successive views, each starting on a 256-byte boundary.
  template <typename T>
  T* take(int64_t count) {
    T* p = reinterpret_cast<T*>(static_cast<char*>(ptr_) + used_);
    used_ += round_up(static_cast<size_t>(count) * sizeof(T));
    return p;
  }
  static size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

 private:
  void* ptr_ = nullptr;
  size_t used_ = 0;
  cudaStream_t stream_;
};

// Warp-strided loops: every lane of a warp sees the same work item, so warp shuffles stay legal.
__device__ __forceinline__ int64_t global_warp() { return (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; }
__device__ __forceinline__ int64_t warps_in_grid() { return int64_t{gridDim.x} * blockDim.x / 32; }

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Dot product of two bf16 rows of length n, in fp32, summed over the warp.
__device__ __forceinline__ float warp_dot(const bf16* a, const bf16* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = threadIdx.x % 32; i < n; i += 32) acc += __bfloat162float(a[i]) * __bfloat162float(b[i]);
  return warp_sum(acc);
}

// One warp routes one token: p [E] holds the router logits and is overwritten with the softmax,
// then with -1 at each chosen expert; experts/weights [top_k] receive the choices in rank order.
__device__ void route_token(float* p, int E, int top_k, bool renormalize, int32_t* experts, float* weights) {
  const int lane = threadIdx.x % 32;
  float max_logit = -FLT_MAX;
  for (int e = lane; e < E; e += 32) max_logit = fmaxf(max_logit, p[e]);
  max_logit = warp_max(max_logit);
  float sum = 0.0f;
  for (int e = lane; e < E; e += 32) {
    p[e] = expf(p[e] - max_logit);
    sum += p[e];
  }
  sum = warp_sum(sum);
  for (int e = lane; e < E; e += 32) p[e] /= sum;
  __syncwarp();

  float chosen = 0.0f;
  for (int k = 0; k < top_k; ++k) {
    float best = -1.0f;
    int best_e = E;
    for (int e = lane; e < E; e += 32) {
      if (p[e] > best) {  // strict: the lower id wins a tie within the lane
        best = p[e];
        best_e = e;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_e = __shfl_xor_sync(0xffffffffu, best_e, offset);
      if (other > best || (other == best && other_e < best_e)) {
        best = other;
        best_e = other_e;
      }
    }
    if (best_e == E) {  // only NaN logits leave nothing to choose: keep the id in range, the weight NaN
      best_e = 0;
      best = NAN;
    }
    chosen += best;
    if (lane == 0) {
      experts[k] = best_e;
      weights[k] = best;
      p[best_e] = -1.0f;  // below every probability: never chosen again
    }
    __syncwarp();
  }
  if (renormalize) {
    for (int k = lane; k < top_k; k += 32) weights[k] /= chosen;
  }
}

__global__ void route_kernel(float* probs, int64_t T, int E, int top_k, bool renormalize, int32_t* experts,
                             float* weights) {
  await_previous_kernel();
  for (int64_t t = global_warp(); t < T; t += warps_in_grid()) {
    route_token(probs + t * E, E, top_k, renormalize, experts + t * top_k, weights + t * top_k);
  }
}

// One warp per (route r = t * top_k + k, intermediate index i):
// hidden[r, i] = silu(gate_e[i] · x[t]) * (up_e[i] · x[t]) with e the route's expert.
__global__ void expert_swiglu_kernel(const bf16* x, const bf16* gate_up, const int32_t* experts, int64_t routes,
                                     int top_k, int64_t H, int64_t I, float* hidden) {
  await_previous_kernel();
  for (int64_t warp = global_warp(); warp < routes * I; warp += warps_in_grid()) {
    const int64_t r = warp / I, i = warp % I;
    const bf16* expert = gate_up + int64_t{experts[r]} * 2 * I * H;
    const bf16* token = x + r / top_k * H;
    const float gate = warp_dot(expert + i * H, token, H);
    const float up = warp_dot(expert + (I + i) * H, token, H);
    if (threadIdx.x % 32 == 0) hidden[warp] = gate / (1.0f + expf(-gate)) * up;
  }
}

// One warp per (token t, output j): out[t, j] = Σ_k weight_k * (down_e_k[j] · hidden[t * top_k + k]),
// summed in rank order.
__global__ void expert_down_kernel(const float* hidden, const bf16* down, const int32_t* experts, const float* weights,
                                   int64_t T, int top_k, int64_t H, int64_t I, bf16* out) {
  await_previous_kernel();
  for (int64_t warp = global_warp(); warp < T * H; warp += warps_in_grid()) {
    const int64_t t = warp / H, j = warp % H;
    float total = 0.0f;
    for (int k = 0; k < top_k; ++k) {
      const int64_t r = t * top_k + k;
      const bf16* row = down + (int64_t{experts[r]} * H + j) * I;
      const float* h = hidden + r * I;
      float acc = 0.0f;
      for (int64_t i = threadIdx.x % 32; i < I; i += 32) acc += __bfloat162float(row[i]) * h[i];
      total += weights[r] * warp_sum(acc);
    }
    if (threadIdx.x % 32 == 0) out[warp] = __float2bfloat16(total);
  }
}

unsigned blocks_for_warps(int64_t warps) { return blocks_for(warps * 32, kThreads); }

}  // namespace

void CudaBackend::moe(const Tensor& x, const MoeWeights& w, Tensor& out) {
  const MoeShape shape = check_moe_args(x, w, out, DType::BF16);
  const int64_t T = shape.tokens, H = shape.hidden, E = shape.experts, I = shape.inter;
  const int top_k = shape.top_k;
  if (T == 0) return;

  const int64_t routes = T * top_k;
  StreamScratch scratch(
      StreamScratch::round_up(T * E * sizeof(float)) + StreamScratch::round_up(routes * sizeof(int32_t)) +
          StreamScratch::round_up(routes * sizeof(float)) + StreamScratch::round_up(routes * I * sizeof(float)),
      stream_);
  Tensor probs(scratch.take<float>(T * E), DType::F32, {T, E});
  int32_t* experts = scratch.take<int32_t>(routes);
  float* weights = scratch.take<float>(routes);
  float* hidden = scratch.take<float>(routes * I);

  matmul(x, w.router, probs);
  launch_kernel("route_kernel", route_kernel, blocks_for_warps(T), kThreads, 0, stream_, probs.ptr<float>(), T,
                static_cast<int>(E), top_k, w.renormalize, experts, weights);
  launch_kernel("expert_swiglu_kernel", expert_swiglu_kernel, blocks_for_warps(routes * I), kThreads, 0, stream_,
                x.ptr<bf16>(), w.gate_up.ptr<bf16>(), experts, routes, top_k, H, I, hidden);
  launch_kernel("expert_down_kernel", expert_down_kernel, blocks_for_warps(T * H), kThreads, 0, stream_, hidden,
                w.down.ptr<bf16>(), experts, weights, T, top_k, H, I, out.ptr<bf16>());
}

}  // namespace jet::cuda
