// The MoE op alone at one SDAR-30B-A3B layer's shapes (hidden 2048, 128 experts of width 768,
// top-8, renormalised), random weights: CudaBackend::moe timed with CUDA events at each token
// count, against the bytes every expert's weights take to read once and the FLOPs of the routed
// products. A decode forward of BATCH sequences with 4-token blocks runs the op on 4 * BATCH
// tokens in each of its 48 layers, so this isolates what `jetengine bench` spends in `moe`
// without loading 58 GB of weights or capturing graphs.
//
//   moe_op_bench [TOKENS,...=128,512,1024,2048] [LAYERS=2]
//
// LAYERS weight sets (1.2 GB each, far beyond L2) are cycled so that no call finds the previous
// one's weights cached. Prints, per token count, the fastest and the median of 30 calls in µs,
// the weight bandwidth that is (GB/s, as if every expert were read) and the routed TFLOP/s.
// Preload bench/libjet_kernel_trace.so to split the time between the op's kernels.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_factory.h"
#include "core/dtype.h"

using namespace jet;

namespace {

constexpr int64_t kHidden = 2048, kExperts = 128, kInter = 768;
constexpr int kTopK = 8;

#define CHECK(call) ::jet::cuda::check((call), #call)

// Fills a bf16 tensor with uniform values in [-scale, scale) (xorshift32).
void fill_uniform(Backend& be, const Tensor& t, uint32_t seed, float scale) {
  std::vector<uint16_t> host(static_cast<size_t>(t.numel()));
  for (uint16_t& v : host) {
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    v = f32_to_bf16(scale * (static_cast<float>(seed) / 2147483648.0f - 1.0f));
  }
  be.upload(t.data, host.data(), host.size() * sizeof(uint16_t));
}

std::vector<int64_t> parse_counts(const char* text) {
  std::vector<int64_t> counts;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) counts.push_back(std::atoll(item.c_str()));
  return counts;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<int64_t> token_counts = parse_counts(argc > 1 ? argv[1] : "128,512,1024,2048");
  const int layers = argc > 2 ? std::atoi(argv[2]) : 2;
  const bool valid = layers >= 1 && !token_counts.empty() &&
                     std::all_of(token_counts.begin(), token_counts.end(), [](int64_t t) { return t >= 1; });
  if (!valid) {
    std::fprintf(stderr, "usage: moe_op_bench [TOKENS,... each >= 1] [LAYERS >= 1]\n");
    return 2;
  }
  const int64_t max_tokens = *std::max_element(token_counts.begin(), token_counts.end());
  auto backend = make_cuda_backend();
  auto& be = static_cast<cuda::CudaBackend&>(*backend);
  const cudaStream_t stream = be.stream();
  std::vector<Buffer> owner;
  Tensor x = be.alloc_tensor(owner, DType::BF16, {max_tokens, kHidden});
  Tensor out = be.alloc_tensor(owner, DType::BF16, {max_tokens, kHidden});
  fill_uniform(be, x, 12345, 1.0f);
  std::vector<MoeWeights> weights;
  uint32_t seed = 1;
  for (int l = 0; l < layers; ++l) {
    MoeWeights w{be.alloc_tensor(owner, DType::BF16, {kExperts, kHidden}),
                 {be.alloc_tensor(owner, DType::BF16, {kExperts, 2 * kInter, kHidden})},
                 {be.alloc_tensor(owner, DType::BF16, {kExperts, kHidden, kInter})},
                 kTopK};
    fill_uniform(be, w.router, seed++, 1.0f);
    fill_uniform(be, w.gate_up.weight, seed++, 0.05f);
    fill_uniform(be, w.down.weight, seed++, 0.05f);
    weights.push_back(w);
  }

  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  const double weight_bytes = 3.0 * kExperts * kInter * kHidden * 2;
  std::printf("tokens  fastest_us  median_us  weight_GB/s  routed_TFLOP/s\n");
  int call = 0;
  for (const int64_t tokens : token_counts) {
    Tensor x_t = x.rows(0, tokens), out_t = out.rows(0, tokens);
    for (int i = 0; i < 3; ++i) be.moe(x_t, weights[call++ % layers], out_t);
    std::vector<double> us;
    for (int i = 0; i < 30; ++i) {
      CHECK(cudaEventRecord(start, stream));
      be.moe(x_t, weights[call++ % layers], out_t);
      CHECK(cudaEventRecord(stop, stream));
      CHECK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      CHECK(cudaEventElapsedTime(&ms, start, stop));
      us.push_back(ms * 1000.0);
    }
    std::sort(us.begin(), us.end());
    const double fastest = us.front(), median = us[us.size() / 2];
    const double flops = 2.0 * tokens * kTopK * 3.0 * kInter * kHidden;
    std::printf("%6lld  %10.1f  %9.1f  %11.0f  %14.1f\n", static_cast<long long>(tokens), fastest, median,
                weight_bytes / median / 1e3, flops / median / 1e6);
  }
  return 0;
}
