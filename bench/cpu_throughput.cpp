// cpu_throughput: completion tokens/s of the engine on the CPU backend, and where the time goes
// (per backend op; the GEMM share should dominate). Usage:
//   cpu_throughput --model DIR [--batches 1,16] [--prompt-len 64] [--max-tokens 128] [--threads N]
// bench/run_cpu.sh makes the model and runs it.
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "jet/engine.h"

namespace {

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
    std::fprintf(stderr, "usage: cpu_throughput --model DIR [--batches 1,16] [--prompt-len 64] [--max-tokens 128]\n");
    return 2;
  }
  const int prompt_len = std::stoi(flag(argc, argv, "--prompt-len", "64"));
  const int max_tokens = std::stoi(flag(argc, argv, "--max-tokens", "128"));
  std::vector<int> batches;
  std::stringstream ss(flag(argc, argv, "--batches", "1,16"));
  for (std::string b; std::getline(ss, b, ',');) batches.push_back(std::stoi(b));

  jet::EngineOptions opts;
  opts.model = model;
  opts.device = "cpu";
  opts.profile_ops = true;
  opts.num_threads = std::stoi(flag(argc, argv, "--threads", "0"));
  jet::Engine engine(opts);
  const int vocab = engine.summary().vocab;

  jet::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;  // every prompt produces exactly max_tokens
  p.denoising_steps = 4;
  std::printf("model %s  block %d  steps %d  prompt %d  max_tokens %d  strategy %s\n", model.c_str(),
              engine.summary().block_length, p.denoising_steps, prompt_len, max_tokens, p.remasking_strategy.c_str());
  std::printf("%6s %10s %10s %12s %12s\n", "batch", "tokens", "seconds", "tok/s", "GEMM share");
  std::mt19937 rng(0);
  for (int batch : batches) {
    std::vector<jet::Prompt> prompts;
    for (int i = 0; i < batch; ++i) {
      std::vector<int32_t> ids(prompt_len);
      for (int32_t& id : ids) id = static_cast<int32_t>(3 + rng() % (vocab / 2));
      prompts.emplace_back(ids);
    }
    const auto before = engine.op_seconds();
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
    std::printf("%6d %10zu %10.3f %12.1f %11.1f%%\n", batch, tokens, secs, tokens / secs, 100.0 * gemm / secs);
    std::printf("       op time %.3f s of %.3f s wall:", ops, secs);
    for (const auto& [op, s] : engine.op_seconds()) {
      const double delta = s - (before.count(op) ? before.at(op) : 0.0);
      std::printf(" %s %.1f%%", op.c_str(), 100.0 * delta / secs);
    }
    std::printf("\n");
  }
  return 0;
}
