// `jetengine bench`: completion tokens/s of the engine. Mode 1 (the original's bench_throughput):
// a batch of random prompts, each running to max_tokens; Mode 2 (--mode2): streamed requests of
// varied lengths. With --profile, where the time goes per backend op. bench/run_gpu.sh and
// bench/run_cpu.sh run it on their models; figures are logged in bench/results/.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arg_parser.h"
#include "commands.h"
#include "data_parallel_run.h"
#include "engine_flags.h"
#include "jet/data_parallel.h"
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
  --data-parallel N         N engine processes, one on each of GPUs 0..N-1 (T each from GPU rank x T
                            with --tensor-parallel-size T; with --device cpu, N sharing the cores); each batch and Mode 2's requests are split
                            between them, their timed runs start together, and each row is their
                            sum (tokens over the first start to the last end)

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

// Op seconds spent since `before` (a profile taken earlier).
std::map<std::string, double> op_seconds_since(const Engine& engine, const std::map<std::string, double>& before) {
  std::map<std::string, double> delta;
  for (const auto& [op, s] : engine.op_seconds()) delta[op] = s - (before.count(op) ? before.at(op) : 0.0);
  return delta;
}

// One measured run: a Mode 1 batch (batch > 0) or Mode 2 (batch 0), on one engine or summed over
// the data-parallel ranks (seconds from the first start to the last end).
struct BenchRow {
  int batch = 0;
  size_t tokens = 0;
  double start = 0, end = 0, idle = 0;  // steady-clock seconds, the same clock in every process
  int64_t forwards = 0;
  std::map<std::string, double> ops;  // --profile only

  nlohmann::json to_json() const {
    return {{"batch", batch}, {"tokens", tokens}, {"start", start},
            {"end", end},     {"idle", idle},     {"forwards", forwards}};
  }
  static BenchRow from_json(const nlohmann::json& j) {
    BenchRow r;
    r.batch = j["batch"].get<int>();
    r.tokens = j["tokens"].get<size_t>();
    r.start = j["start"].get<double>();
    r.end = j["end"].get<double>();
    r.idle = j["idle"].get<double>();
    r.forwards = j["forwards"].get<int64_t>();
    return r;
  }
  // The ranks' rows of one run as one: their tokens, from the first start to the last end, the
  // most forwards one took, their mean idle time.
  static BenchRow merged(const std::vector<BenchRow>& rows) {
    BenchRow m = rows.front();
    m.tokens = 0;
    m.idle = 0;
    for (const BenchRow& r : rows) {
      m.tokens += r.tokens;
      m.start = std::min(m.start, r.start);
      m.end = std::max(m.end, r.end);
      m.forwards = std::max(m.forwards, r.forwards);
      m.idle += r.idle / static_cast<double>(rows.size());
    }
    return m;
  }
};

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct BenchPlan {
  std::vector<int> batches;
  int prompt_len = 64, requests = 0, max_active = 128;
  SamplingParams params;
};

// Runs the plan on one engine. share(costs) says which of a run's prompts this engine decodes
// (all of them, or a data-parallel rank's); sync() comes right before each timed run.
void run_bench(Engine& engine, const BenchPlan& plan,
               const std::function<std::vector<int64_t>(const std::vector<int64_t>&)>& share,
               const std::function<void()>& sync, const std::function<void(const BenchRow&)>& report) {
  const int vocab = engine.summary().vocab;
  std::mt19937 rng(0);
  auto pick = [&](const std::vector<jet::Prompt>& all, const std::vector<int64_t>& costs) {
    std::vector<jet::Prompt> mine;
    for (int64_t i : share(costs)) mine.push_back(all[size_t(i)]);
    return mine;
  };
  for (int batch : plan.batches) {
    const std::vector<jet::Prompt> prompts =
        pick(random_prompts(rng, batch, plan.prompt_len, vocab), std::vector<int64_t>(size_t(batch), 1));
    if (!prompts.empty()) {  // Warm-up outside the timing: first-use costs are start-up, not throughput.
      SamplingParams warm = plan.params;
      warm.max_tokens = 8;
      engine.generate(prompts, {warm});
    }
    sync();
    BenchRow row;
    row.batch = batch;
    const auto ops_before = engine.op_seconds();
    const double idle_before = engine.device_idle_seconds();
    const int64_t forwards_before = engine.num_forwards();
    row.start = now_seconds();
    if (!prompts.empty()) {
      for (const auto& out : engine.generate(prompts, {plan.params})) row.tokens += out.completion_ids.size();
    }
    row.end = now_seconds();
    row.idle = engine.device_idle_seconds() - idle_before;
    row.forwards = engine.num_forwards() - forwards_before;
    row.ops = op_seconds_since(engine, ops_before);
    report(row);
  }
  if (plan.requests == 0) return;
  std::vector<jet::Prompt> prompts;
  std::vector<jet::SamplingParams> params;
  std::vector<int64_t> costs;
  for (int i = 0; i < plan.requests; ++i) {
    const int length = static_cast<int>(50 + rng() % 551);
    prompts.push_back(random_prompts(rng, 1, length, vocab)[0]);
    params.push_back(plan.params);
    params.back().max_tokens = static_cast<int>(64 + rng() % 449);
    costs.push_back(length + params.back().max_tokens);
  }
  const std::vector<int64_t> mine = share(costs);
  std::vector<jet::Prompt> my_prompts;
  std::vector<jet::SamplingParams> my_params;
  for (int64_t i : mine) my_prompts.push_back(prompts[size_t(i)]), my_params.push_back(params[size_t(i)]);
  sync();
  BenchRow row;
  const double idle_before = engine.device_idle_seconds();
  row.start = now_seconds();
  if (!my_prompts.empty()) {
    engine.generate_streaming(my_prompts, my_params, plan.max_active,
                              [&](size_t, jet::GenerationOutput&& out) { row.tokens += out.completion_ids.size(); });
  }
  row.end = now_seconds();
  row.idle = engine.device_idle_seconds() - idle_before;
  report(row);
}

void print_row(const BenchRow& row, const BenchPlan& plan, bool profile) {
  const double secs = row.end - row.start;
  if (row.batch == 0) {
    std::printf(
        "mode 2: %d requests (prompt 50-600, max_tokens 64-512), max_active %d: %zu tokens in %.3f s = %.1f "
        "tok/s, device idle %.1f%%\n",
        plan.requests, plan.max_active, row.tokens, secs, row.tokens / secs, 100.0 * row.idle / secs);
    std::fflush(stdout);
    return;
  }
  std::printf("%6d %10zu %10.3f %12.1f %9lld %9.3f %11.1f%%", row.batch, row.tokens, secs, row.tokens / secs,
              static_cast<long long>(row.forwards),
              1e3 * secs / static_cast<double>(std::max<int64_t>(row.forwards, 1)), 100.0 * row.idle / secs);
  if (profile) {
    double op_total = 0;
    for (const auto& [op, s] : row.ops) op_total += s;
    const double gemm = row.ops.count("matmul") ? row.ops.at("matmul") : 0.0;
    std::printf(" %11.1f%%\n       op time %.3f s of %.3f s wall:", 100.0 * gemm / secs, op_total, secs);
    for (const auto& [op, s] : row.ops) std::printf(" %s %.1f%%", op.c_str(), 100.0 * s / secs);
  }
  std::printf("\n");
  std::fflush(stdout);  // each row as it is measured, also into a pipe (a run cut short keeps its rows)
}

}  // namespace

int cmd_bench(const Args& raw) {
  ArgParser args(
      raw,
      with_engine_value_flags({"--batches", "--prompt-len", "--max-tokens", "--denoising-steps", "--strategy",
                               "--mode2", "--max-active", "--temperature", "--top-k", "--top-p", "--data-parallel"}),
      with_engine_bool_flags({"--profile", "--help"}));
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    std::fputs(kEngineFlagsHelp, stdout);
    return 0;
  }
  BenchPlan plan;
  plan.prompt_len = args.get_int32("--prompt-len", 64);
  const int max_tokens = args.get_int32("--max-tokens", 128);
  plan.requests = args.get_int32("--mode2", 0);
  plan.max_active = args.get_int32("--max-active", 128);
  JET_CHECK(plan.prompt_len >= 1 && max_tokens >= 1 && plan.requests >= 0 && plan.max_active >= 1,
            "--prompt-len, --max-tokens and --max-active must be positive, --mode2 not negative");
  for (long long b : args.get_int_list("--batches", "1,16")) {
    JET_CHECK(b >= 1 && b <= INT32_MAX, "--batches: batch sizes must be positive, got ", b);
    plan.batches.push_back(static_cast<int>(b));
  }
  const int world = args.get_int32("--data-parallel", 1);
  JET_CHECK(world >= 1 && world <= 4096, "flag --data-parallel expects a count of engine processes >= 1, got ", world);
  JET_CHECK(world == 1 || !args.has("--profile"), "--profile times one engine's ops: drop --data-parallel");

  EngineOptions options = read_engine_options(args);
  if (!args.has("--max-num-seqs")) options.max_num_seqs = 512;
  options.profile_ops = args.has("--profile");
  if (world > 1) rank_options(options, 0, world);  // a device the ranks cannot share fails here, once

  SamplingParams& p = plan.params;
  p.temperature = args.get_double("--temperature", 0.0);
  p.top_k = args.get_int32("--top-k", p.top_k);
  p.top_p = args.get_double("--top-p", p.top_p);
  p.seed = 0;  // the same draws in every run
  p.max_tokens = max_tokens;
  p.ignore_eos = true;  // every prompt produces exactly max_tokens
  p.remasking_strategy = args.get("--strategy").value_or(p.remasking_strategy);
  // The engine checks the parameters, prints the header and the rows (rank 0 the header, the
  // parent the rows, under --data-parallel).
  auto prepare = [&](Engine& engine) {
    p.denoising_steps = args.get_int32("--denoising-steps", default_denoising_steps(engine));
    engine.check_params(p);
  };
  auto header = [&](const Engine& engine) {
    std::printf(
        "device %s  model %s  block %d  steps %d  prompt %d  max_tokens %d  strategy %s  temperature %g"
        "  top_k %d  top_p %g%s\n",
        engine.summary().device.c_str(), options.model.c_str(), engine.summary().block_length, p.denoising_steps,
        plan.prompt_len, max_tokens, p.remasking_strategy.c_str(), p.temperature, p.top_k, p.top_p,
        world > 1 ? str("  data parallel ", world, " engines (rows: their sum)").c_str() : "");
    std::printf("%6s %10s %10s %12s %9s %9s %12s %12s\n", "batch", "tokens", "seconds", "tok/s", "forwards", "ms/fwd",
                "device idle", options.profile_ops ? "GEMM share" : "");
    std::fflush(stdout);
  };
  if (world == 1) {
    Engine engine(options);
    prepare(engine);
    header(engine);
    run_bench(
        engine, plan, [](const std::vector<int64_t>& costs) { return data_parallel_share(costs, 1, 0); }, [] {},
        [&](const BenchRow& row) { print_row(row, plan, options.profile_ops); });
    return 0;
  }
  std::vector<std::vector<BenchRow>> runs;  // per run, the rows of the ranks that reported it
  run_data_parallel(
      world,
      [&](int rank, const RankChannel& channel) {
        Engine engine(rank_options(options, rank, world));
        prepare(engine);
        if (rank == 0) header(engine);
        run_bench(
            engine, plan, [&](const std::vector<int64_t>& costs) { return data_parallel_share(costs, world, rank); },
            [&] { channel.wait_for_all(); }, [&](const BenchRow& row) { channel.send(row.to_json()); });
      },
      [&](int, const nlohmann::json& message) {
        const BenchRow row = BenchRow::from_json(message);
        size_t run = 0;
        while (run < runs.size() && (runs[run].size() == size_t(world) || runs[run].front().batch != row.batch)) ++run;
        if (run == runs.size()) runs.emplace_back();
        runs[run].push_back(row);
        if (runs[run].size() == size_t(world)) print_row(BenchRow::merged(runs[run]), plan, false);
      });
  return 0;
}

}  // namespace jet::cli
