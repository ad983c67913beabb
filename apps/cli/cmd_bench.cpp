// `jetengine bench`: completion tokens/s of the engine. Mode 1 (the original's bench_throughput):
// a batch of random prompts, each running to max_tokens; Mode 2 (--mode2): streamed requests of
// varied lengths. With --profile, where the time goes per backend op. bench/run_gpu.sh and
// bench/run_cpu.sh run it on their models; figures are logged in bench/results/.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "arg_parser.h"
#include "commands.h"
#include "engine_flags.h"
#include "jet/engine.h"
#include "sampling_flags.h"

namespace jet::cli {

namespace {

constexpr const char* kHelp = R"(usage: jetengine bench --model DIR [options]

Mode 1: for each batch size, that many prompts of random token ids in [3, vocab / 2) (seeded),
greedy unless --temperature says otherwise, ignore_eos (each runs to --max-tokens), after an
untimed warm-up of 8 tokens (GEMM plans, buffers, CUDA graphs; a block is denoised whole, so with
long blocks the warm-up takes as long as the first block). Prints tokens, seconds, completion
tok/s, the model forwards the batch took (prefills and denoise steps) and the wall milliseconds
per forward, and "device idle": the share of the wall time the device waited for the host
between forwards.

Benchmark
  --batches A,B,...         batch sizes (default 1,16)
  --prompt-len N            prompt tokens (default 64)
  --max-tokens N            completion tokens per prompt (default 128)
  --denoising-steps S       steps per block, 1..B (default 4, capped at B)
  --strategy NAME           remasking strategy (default low_confidence_static)
  --temperature T           0 = greedy (default 0); above 0, each request samples with seed 0
  --top-k K                 0 = off (default 0)
  --top-p P                 in (0, 1], 1 = off (default 1.0)
  --profile                 time every backend op (each is synchronised, CUDA graphs off, so the
                            run is slower) and print each op's share of the wall time
  --mode2 REQUESTS          after Mode 1, Mode 2: REQUESTS prompts of 50-600 random tokens with
                            max_tokens 64-512 each (seeded), streamed with --max-active in flight
  --max-active N            Mode 2's requests in flight (default 128)

The engine flags below apply; here --max-num-seqs defaults to 512 (every batch in one step).
--load-format dummy benchmarks a folder holding only config.json and the tokenizer.

)";

std::vector<jet::Prompt> random_prompts(std::mt19937& rng, size_t count, int length, int vocab) {
  std::vector<jet::Prompt> prompts;
  for (size_t i = 0; i < count; ++i) {
    std::vector<int32_t> ids(length);
    for (int32_t& id : ids) id = static_cast<int32_t>(3 + rng() % (vocab / 2));
    prompts.emplace_back(ids);
  }
  return prompts;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Op seconds spent since `before` (a profile taken earlier).
std::map<std::string, double> op_seconds_since(const Engine& engine, const std::map<std::string, double>& before) {
  std::map<std::string, double> delta;
  for (const auto& [op, s] : engine.op_seconds()) delta[op] = s - (before.count(op) ? before.at(op) : 0.0);
  return delta;
}

}  // namespace

int cmd_bench(const Args& raw) {
  ArgParser args(
      raw,
      with_engine_value_flags({"--batches", "--prompt-len", "--max-tokens", "--denoising-steps", "--strategy",
                               "--mode2", "--max-active", "--temperature", "--top-k", "--top-p"}),
      with_engine_bool_flags({"--profile", "--help"}));
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    std::fputs(kEngineFlagsHelp, stdout);
    return 0;
  }
  const int prompt_len = args.get_int32("--prompt-len", 64);
  const int max_tokens = args.get_int32("--max-tokens", 128);
  const int requests = args.get_int32("--mode2", 0);
  const int max_active = args.get_int32("--max-active", 128);
  JET_CHECK(prompt_len >= 1 && max_tokens >= 1 && requests >= 0 && max_active >= 1,
            "--prompt-len, --max-tokens and --max-active must be positive, --mode2 not negative");
  std::vector<int> batches;
  for (long long b : args.get_int_list("--batches", "1,16")) {
    JET_CHECK(b >= 1 && b <= INT32_MAX, "--batches: batch sizes must be positive, got ", b);
    batches.push_back(static_cast<int>(b));
  }

  EngineOptions options = read_engine_options(args);
  if (!args.has("--max-num-seqs")) options.max_num_seqs = 512;
  options.profile_ops = args.has("--profile");
  Engine engine(options);
  const int vocab = engine.summary().vocab;

  SamplingParams p;
  p.temperature = args.get_double("--temperature", 0.0);
  p.top_k = args.get_int32("--top-k", p.top_k);
  p.top_p = args.get_double("--top-p", p.top_p);
  p.seed = 0;  // the same draws in every run
  p.max_tokens = max_tokens;
  p.ignore_eos = true;  // every prompt produces exactly max_tokens
  p.denoising_steps = args.get_int32("--denoising-steps", default_denoising_steps(engine));
  p.remasking_strategy = args.get("--strategy").value_or(p.remasking_strategy);
  engine.check_params(p);
  std::printf(
      "device %s  model %s  block %d  steps %d  prompt %d  max_tokens %d  strategy %s  temperature %g"
      "  top_k %d  top_p %g\n",
      engine.summary().device.c_str(), options.model.c_str(), engine.summary().block_length, p.denoising_steps,
      prompt_len, max_tokens, p.remasking_strategy.c_str(), p.temperature, p.top_k, p.top_p);
  std::printf("%6s %10s %10s %12s %9s %9s %12s %12s\n", "batch", "tokens", "seconds", "tok/s", "forwards", "ms/fwd",
              "device idle", options.profile_ops ? "GEMM share" : "");
  std::fflush(stdout);
  std::mt19937 rng(0);
  for (int batch : batches) {
    const std::vector<jet::Prompt> prompts = random_prompts(rng, batch, prompt_len, vocab);
    {  // Warm-up outside the timing: first-use costs are start-up, not throughput.
      SamplingParams warm = p;
      warm.max_tokens = 8;
      engine.generate(prompts, {warm});
    }
    const auto ops_before = engine.op_seconds();
    const double idle_before = engine.device_idle_seconds();
    const int64_t forwards_before = engine.num_forwards();
    const auto start = std::chrono::steady_clock::now();
    size_t tokens = 0;
    for (const auto& out : engine.generate(prompts, {p})) tokens += out.completion_ids.size();
    const double secs = seconds_since(start);
    const double idle = engine.device_idle_seconds() - idle_before;
    const int64_t forwards = engine.num_forwards() - forwards_before;
    std::printf("%6d %10zu %10.3f %12.1f %9lld %9.3f %11.1f%%", batch, tokens, secs, tokens / secs,
                static_cast<long long>(forwards), 1e3 * secs / static_cast<double>(forwards), 100.0 * idle / secs);
    if (!options.profile_ops) {
      std::printf("\n");
      std::fflush(stdout);  // each row as it is measured, also into a pipe (a run cut short keeps its rows)
      continue;
    }
    const auto ops = op_seconds_since(engine, ops_before);
    double op_total = 0;
    for (const auto& [op, s] : ops) op_total += s;
    const double gemm = ops.count("matmul") ? ops.at("matmul") : 0.0;
    std::printf(" %11.1f%%\n       op time %.3f s of %.3f s wall:", 100.0 * gemm / secs, op_total, secs);
    for (const auto& [op, s] : ops) std::printf(" %s %.1f%%", op.c_str(), 100.0 * s / secs);
    std::printf("\n");
    std::fflush(stdout);
  }

  if (requests > 0) {
    std::vector<jet::Prompt> prompts;
    std::vector<jet::SamplingParams> params;
    for (int i = 0; i < requests; ++i) {
      const int length = static_cast<int>(50 + rng() % 551);
      prompts.push_back(random_prompts(rng, 1, length, vocab)[0]);
      params.push_back(p);
      params.back().max_tokens = static_cast<int>(64 + rng() % 449);
    }
    size_t tokens = 0;
    const double idle_before = engine.device_idle_seconds();
    const auto start = std::chrono::steady_clock::now();
    engine.generate_streaming(prompts, params, max_active,
                              [&](size_t, jet::GenerationOutput&& out) { tokens += out.completion_ids.size(); });
    const double secs = seconds_since(start);
    const double idle = engine.device_idle_seconds() - idle_before;
    std::printf(
        "mode 2: %d requests (prompt 50-600, max_tokens 64-512), max_active %d: %zu tokens in %.3f s = %.1f "
        "tok/s, device idle %.1f%%\n",
        requests, max_active, tokens, secs, tokens / secs, 100.0 * idle / secs);
  }
  return 0;
}

}  // namespace jet::cli
