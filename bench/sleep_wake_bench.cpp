// Sleep mode on the GPU: how long Engine::sleep(1) and wake_up take for a model's weights, how
// much device memory the sleep frees, and that the outputs after waking equal those before. The
// floor is the weight bytes over the link's copy rate, measured here with pinned buffers.
//
//   sleep_wake_bench MODEL_DIR [BATCH=32] [ROUNDS=3]
//
// MODEL_DIR holds a config.json and a tokenizer; the weights are random (--load-format dummy).
// Each round: sleep(1), wake_up the weights, then the KV cache, then a greedy generate of BATCH
// prompts (64 tokens, 64 new), whose first forwards record the graphs again. The weights' bytes
// are the device memory that waking them takes. Prints one line per phase and a
// JSON summary line.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "jet/engine.h"

namespace {

double seconds(const std::function<void()>& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  cudaDeviceSynchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double free_gib() {
  size_t free_bytes = 0, total = 0;
  cudaMemGetInfo(&free_bytes, &total);
  return static_cast<double>(free_bytes) / (1 << 30);
}

// GB/s of one 1 GiB pinned copy each way, the best of three.
std::pair<double, double> link_gbps() {
  const size_t bytes = size_t{1} << 30;
  void *host = nullptr, *device = nullptr;
  if (cudaMallocHost(&host, bytes) != cudaSuccess || cudaMalloc(&device, bytes) != cudaSuccess) {
    std::fprintf(stderr, "cannot allocate the copy buffers\n");
    std::exit(1);
  }
  double up = 0, down = 0;
  for (int i = 0; i < 3; ++i) {
    up = std::max(up, bytes / 1e9 / seconds([&] { cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice); }));
    down = std::max(down, bytes / 1e9 / seconds([&] { cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost); }));
  }
  cudaFree(device);
  cudaFreeHost(host);
  return {up, down};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sleep_wake_bench MODEL_DIR [BATCH=32] [ROUNDS=3]\n");
    return 2;
  }
  const int batch = argc > 2 ? std::atoi(argv[2]) : 32;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  const auto [up_gbps, down_gbps] = link_gbps();

  jet::EngineOptions options;
  options.model = argv[1];
  options.device = "cuda";
  options.load_format = "dummy";
  options.max_num_seqs = batch;
  options.max_model_len = 256;
  options.max_num_batched_tokens = 4096;
  jet::Engine engine(options);
  std::vector<jet::Prompt> prompts;
  for (int i = 0; i < batch; ++i) {
    std::vector<int32_t> ids(64);
    for (int j = 0; j < 64; ++j) ids[j] = 1000 + (i * 131 + j * 17) % 5000;
    prompts.emplace_back(ids);
  }
  jet::SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 64;
  greedy.ignore_eos = true;
  std::vector<jet::GenerationOutput> before;
  const double first = seconds([&] { before = engine.generate(prompts, {greedy}); });
  const double steady = seconds([&] { engine.generate(prompts, {greedy}); });
  const double awake_free = free_gib();

  double first_sleep_s = 0, sleep_s = 1e9, wake_weights_s = 1e9, wake_kv_s = 1e9, after_wake_s = 1e9, asleep_free = 0,
         weights_gb = 0;
  bool same = true;
  for (int r = 0; r < rounds; ++r) {
    const double s = seconds([&] { engine.sleep(1); });
    if (r == 0) first_sleep_s = s;  // pins the host memory that later sleeps reuse
    sleep_s = std::min(sleep_s, rounds > 1 && r == 0 ? 1e9 : s);
    asleep_free = free_gib();
    wake_weights_s = std::min(wake_weights_s, seconds([&] { engine.wake_up(/*weights=*/true, /*kv_cache=*/false); }));
    weights_gb = (asleep_free - free_gib()) * (1 << 30) / 1e9;
    wake_kv_s = std::min(wake_kv_s, seconds([&] { engine.wake_up(/*weights=*/false, /*kv_cache=*/true); }));
    std::vector<jet::GenerationOutput> after;
    after_wake_s = std::min(after_wake_s, seconds([&] { after = engine.generate(prompts, {greedy}); }));
    for (size_t i = 0; i < after.size(); ++i) same = same && after[i].token_ids == before[i].token_ids;
  }
  const double freed_gb = (asleep_free - awake_free) * (1 << 30) / 1e9;
  std::printf("link: %.1f GB/s host->device, %.1f GB/s device->host (pinned, 1 GiB)\n", up_gbps, down_gbps);
  std::printf("generate: first %.3f s, steady %.3f s (batch %d, 64 + 64 tokens)\n", first, steady, batch);
  std::printf(
      "sleep(1): first %.3f s (pins the host copy), again %.3f s (floor %.3f s: %.2f GB of weights at %.1f GB/s); "
      "%.2f GB of device memory freed\n",
      first_sleep_s, sleep_s, weights_gb / down_gbps, weights_gb, down_gbps, freed_gb);
  std::printf("wake_up: weights %.3f s (floor %.3f s), KV cache %.3f s; first generate after it %.3f s; outputs %s\n",
              wake_weights_s, weights_gb / up_gbps, wake_kv_s, after_wake_s, same ? "identical" : "DIFFER");
  std::printf(
      "{\"weights_gb\": %.3f, \"freed_gb\": %.3f, \"first_sleep_s\": %.4f, \"sleep_s\": %.4f, \"sleep_floor_s\": %.4f, "
      "\"wake_weights_s\": %.4f, \"wake_floor_s\": %.4f, \"wake_kv_s\": %.4f, \"first_generate_s\": %.4f, "
      "\"steady_generate_s\": %.4f, \"after_wake_generate_s\": %.4f, \"identical\": %s}\n",
      weights_gb, freed_gb, first_sleep_s, sleep_s, weights_gb / down_gbps, wake_weights_s, weights_gb / up_gbps,
      wake_kv_s, first, steady, after_wake_s, same ? "true" : "false");
  return same ? 0 : 1;
}
