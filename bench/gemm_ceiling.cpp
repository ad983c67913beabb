// The GEMM ceiling of Mode 1: the cuBLASLt products of one 4-token block of a batch of BATCH
// SDAR-4B sequences (4 denoising steps, one token committed per step and sequence, the save
// fused into the next block's first forward), run back to back with nothing else, in a burst and
// kept up for seconds. test_gemm_speed's floor is the fastest of ten passes of about 5 ms, at the
// clocks of a cool GPU; a decode run keeps the GPU busy for seconds, and products run back to
// back draw enough power for the H200 to lower its clocks under its power limit. The completion
// tokens per second they allow, kept up, is what an engine that did nothing but its GEMMs would
// reach (README, Benchmarks: the engine against it).
//
//   gemm_ceiling [BATCH=128] [SECONDS=6]
//
// A block: the 36 layers' qkv, o, gate_up and down products (8 weight sets cycled, far beyond L2)
// at 8 * BATCH rows (the saved block and the new one), then at 4 * BATCH rows three times; and the
// LM head (fp32 logits) on the masked rows of each step: 4, 3, 2 and 1 per sequence. Products go
// through CudaBackend::matmul, as in the engine. Prints the burst (fastest of 10 blocks after one)
// and the mean of each half-second window of the sustained run, as ms per block and tok/s.
// Run nvidia-smi --query-gpu=clocks.sm,power.draw beside it to see the clocks.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_factory.h"
#include "core/dtype.h"

using namespace jet;

namespace {

constexpr int kLayers = 36;
constexpr int kWeightSets = 8;
constexpr int kBlock = 4;
constexpr int64_t kHidden = 2560;
constexpr int64_t kIntermediate = 9728;
constexpr int64_t kVocab = 151936;
constexpr int64_t kLayerShapes[][2] = {  // n, k of qkv, o, gate_up, down
    {6144, kHidden},
    {kHidden, 4096},
    {2 * kIntermediate, kHidden},
    {kHidden, kIntermediate}};

#define CHECK(call) ::jet::cuda::check((call), #call)

// Fills a bf16 tensor with uniform values in [-1, 1) (xorshift32), as test_gemm_speed does.
void fill_uniform(Backend& be, const Tensor& t, uint32_t seed) {
  std::vector<uint16_t> host(static_cast<size_t>(t.numel()));
  for (uint16_t& v : host) {
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    v = f32_to_bf16(static_cast<float>(seed) / 2147483648.0f - 1.0f);
  }
  be.upload(t.data, host.data(), host.size() * sizeof(uint16_t));
}

// The first `rows` rows of `t`, `cols` wide (the scratch tensors are as wide as the widest use).
Tensor view(const Tensor& t, int64_t rows, int64_t cols) {
  Tensor v = t.rows(0, rows);
  v.shape[1] = cols;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 128;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 6.0;
  if (batch < 1 || seconds <= 0.0) {
    std::fprintf(stderr, "usage: gemm_ceiling [BATCH >= 1] [SECONDS > 0]\n");
    return 2;
  }
  auto backend = make_cuda_backend();
  auto& be = static_cast<cuda::CudaBackend&>(*backend);
  const cudaStream_t stream = be.stream();
  const int64_t max_rows = 2 * kBlock * batch;
  std::vector<Buffer> owner;
  Tensor x = be.alloc_tensor(owner, DType::BF16, {max_rows, kIntermediate});        // the widest k
  Tensor out = be.alloc_tensor(owner, DType::BF16, {max_rows, 2 * kIntermediate});  // the widest n
  Tensor logits = be.alloc_tensor(owner, DType::F32, {kBlock * batch, kVocab});
  Tensor lm_head = be.alloc_tensor(owner, DType::BF16, {kVocab, kHidden});
  fill_uniform(be, x, 12345);
  fill_uniform(be, lm_head, 777);
  std::vector<std::vector<Tensor>> weights(kWeightSets);
  uint32_t seed = 1;
  for (auto& set : weights) {
    for (const auto& s : kLayerShapes) {
      set.push_back(be.alloc_tensor(owner, DType::BF16, {s[0], s[1]}));
      fill_uniform(be, set.back(), seed++);
    }
  }
  auto forward = [&](int64_t rows, int64_t masked_rows) {
    for (int l = 0; l < kLayers; ++l) {
      for (size_t s = 0; s < std::size(kLayerShapes); ++s) {
        Tensor o = view(out, rows, kLayerShapes[s][0]);
        be.matmul(view(x, rows, kLayerShapes[s][1]), weights[l % kWeightSets][s], o);
      }
    }
    Tensor l = view(logits, masked_rows, kVocab);
    be.matmul(view(x, masked_rows, kHidden), lm_head, l);
  };
  auto block = [&] {
    forward(2 * kBlock * batch, kBlock * batch);
    for (int step = 1; step < kBlock; ++step) forward(kBlock * batch, (kBlock - step) * batch);
  };

  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  auto timed_ms = [&](int blocks) {
    CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < blocks; ++i) block();
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms);
  };
  const double tokens = static_cast<double>(kBlock * batch);
  auto report = [&](const char* what, double ms) {
    std::printf("%s: %.3f ms per block, %.1f tok/s\n", what, ms, tokens / ms * 1000.0);
  };

  block();
  double burst = 1e30;
  for (int i = 0; i < 10; ++i) burst = std::min(burst, timed_ms(1));
  report("burst (fastest of 10 blocks)", burst);

  // A pause first, so that the sustained run starts from a GPU as cool as a bench's.
  CHECK(cudaDeviceSynchronize());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const int per_window = std::max(1, static_cast<int>(500.0 / burst));
  double total_ms = 0.0;
  int total_blocks = 0;
  char what[64];
  for (int window = 0; total_ms < seconds * 1000.0; ++window) {
    const double ms = timed_ms(per_window);
    total_ms += ms;
    total_blocks += per_window;
    std::snprintf(what, sizeof what, "window %2d, to %.1f s", window, total_ms / 1000.0);
    report(what, ms / per_window);
  }
  std::snprintf(what, sizeof what, "sustained, mean over %.1f s", total_ms / 1000.0);
  report(what, total_ms / total_blocks);
  return 0;
}
