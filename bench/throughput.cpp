// throughput: completion tokens/s of the engine (Mode 1 of the original's bench: a batch of
// random prompts, fixed completion length), and with --profile where the time goes per backend op
// (each op is synchronised, so profiled runs are slower). Usage:
//   throughput --model DIR [--device cpu|cuda|auto] [--batches 1,16] [--prompt-len 64]
//              [--max-tokens 128] [--strategy NAME] [--threads N] [--profile] [--enforce-eager]
//              [--kv-cache-mb N] [--load-format auto|dummy]
//              [--mode2 REQUESTS [--max-active 128]]
// --mode2 runs Mode 2 (streaming) after Mode 1: REQUESTS prompts of 50-600 random tokens with
// max_tokens 64-512 each (seeded), through generate_streaming with max_active in flight.
// --kv-cache-mb caps the KV cache (default: the backend's budget, most of the free memory); a
// profiler that saves and restores device memory (ncu's kernel replay) needs room beside it.
// --load-format dummy runs random weights of the folder's config.json (no checkpoint needed).
// bench/run_cpu.sh and bench/run_gpu.sh make a model and run it.
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "jet/engine.h"

namespace {

bool has_flag(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i] == name) return true;
  }
  return false;
}

std::string flag(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = flag(argc, argv, "--model", "");
  if (model.empty()) {
    std::fprintf(stderr, "usage: throughput --model DIR [--device D] [--batches 1,16] [--prompt-len 64] "
                         "[--max-tokens 128] [--strategy NAME] [--threads N] [--profile] [--enforce-eager] [--kv-cache-mb N] "
                         "[--load-format auto|dummy] [--mode2 REQUESTS [--max-active N]]\n");
    return 2;
  }
  const int prompt_len = std::stoi(flag(argc, argv, "--prompt-len", "64"));
  const int max_tokens = std::stoi(flag(argc, argv, "--max-tokens", "128"));
  std::vector<int> batches;
  std::stringstream ss(flag(argc, argv, "--batches", "1,16"));
  for (std::string b; std::getline(ss, b, ',');) batches.push_back(std::stoi(b));

  jet::EngineOptions opts;
  opts.model = model;
  opts.device = flag(argc, argv, "--device", "auto");
  opts.profile_ops = has_flag(argc, argv, "--profile");
  opts.enforce_eager = has_flag(argc, argv, "--enforce-eager");
  opts.kv_cache_memory_bytes = std::stoll(flag(argc, argv, "--kv-cache-mb", "0")) << 20;
  opts.load_format = flag(argc, argv, "--load-format", opts.load_format);
  opts.max_num_seqs = 512;
  opts.num_threads = std::stoi(flag(argc, argv, "--threads", "0"));
  jet::Engine engine(opts);
  const int vocab = engine.summary().vocab;

  jet::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;  // every prompt produces exactly max_tokens
  p.denoising_steps = 4;
  p.remasking_strategy = flag(argc, argv, "--strategy", p.remasking_strategy);
  std::printf("device %s  model %s  block %d  steps %d  prompt %d  max_tokens %d  strategy %s\n",
              engine.summary().device.c_str(), model.c_str(),
              engine.summary().block_length, p.denoising_steps, prompt_len, max_tokens, p.remasking_strategy.c_str());
  // "device idle": the share of the wall time the device waited for the host between forwards.
  std::printf("%6s %10s %10s %12s %12s %12s\n", "batch", "tokens", "seconds", "tok/s", "device idle",
              opts.profile_ops ? "GEMM share" : "");
  std::mt19937 rng(0);
  for (int batch : batches) {
    std::vector<jet::Prompt> prompts;
    for (int i = 0; i < batch; ++i) {
      std::vector<int32_t> ids(prompt_len);
      for (int32_t& id : ids) id = static_cast<int32_t>(3 + rng() % (vocab / 2));
      prompts.emplace_back(ids);
    }
    {  // Warm-up outside the timing: first-use costs (GEMM plans, buffers, CUDA graphs of this
       // batch's shapes) are start-up, not throughput.
      jet::SamplingParams warm = p;
      warm.max_tokens = 8;
      engine.generate(prompts, {warm});
    }
    const auto before = engine.op_seconds();
    const double idle_before = engine.device_idle_seconds();
    const auto start = std::chrono::steady_clock::now();
    size_t tokens = 0;
    for (const auto& out : engine.generate(prompts, {p})) tokens += out.completion_ids.size();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double ops = 0, gemm = 0;
    for (const auto& [op, s] : engine.op_seconds()) {
      const double delta = s - (before.count(op) ? before.at(op) : 0.0);
      ops += delta;
      if (op == "matmul") gemm = delta;
    }
    const double idle = engine.device_idle_seconds() - idle_before;
    std::printf("%6d %10zu %10.3f %12.1f %11.1f%%", batch, tokens, secs, tokens / secs, 100.0 * idle / secs);
    if (!opts.profile_ops) {
      std::printf("\n");
      continue;
    }
    std::printf(" %11.1f%%\n       op time %.3f s of %.3f s wall:", 100.0 * gemm / secs, ops, secs);
    for (const auto& [op, s] : engine.op_seconds()) {
      const double delta = s - (before.count(op) ? before.at(op) : 0.0);
      std::printf(" %s %.1f%%", op.c_str(), 100.0 * delta / secs);
    }
    std::printf("\n");
  }

  const int requests = std::stoi(flag(argc, argv, "--mode2", "0"));
  if (requests > 0) {
    const int max_active = std::stoi(flag(argc, argv, "--max-active", "128"));
    std::vector<jet::Prompt> prompts;
    std::vector<jet::SamplingParams> params;
    for (int i = 0; i < requests; ++i) {
      std::vector<int32_t> ids(50 + rng() % 551);
      for (int32_t& id : ids) id = static_cast<int32_t>(3 + rng() % (vocab / 2));
      prompts.emplace_back(ids);
      params.push_back(p);
      params.back().max_tokens = static_cast<int>(64 + rng() % 449);
    }
    size_t tokens = 0;
    const double idle_before = engine.device_idle_seconds();
    const auto start = std::chrono::steady_clock::now();
    engine.generate_streaming(prompts, params, max_active,
                              [&](size_t, jet::GenerationOutput&& out) { tokens += out.completion_ids.size(); });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double idle = engine.device_idle_seconds() - idle_before;
    std::printf("mode 2: %d requests (prompt 50-600, max_tokens 64-512), max_active %d: %zu tokens in %.3f s = %.1f "
                "tok/s, device idle %.1f%%\n",
                requests, max_active, tokens, secs, tokens / secs, 100.0 * idle / secs);
  }
  return 0;
}
