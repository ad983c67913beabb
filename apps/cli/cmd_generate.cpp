// `jetengine generate`: prompts from a flag or a JSON-lines file, sampling flags, text or JSON out.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "arg_parser.h"
#include "commands.h"
#include "data_parallel_run.h"
#include "engine_flags.h"
#include "jet/data_parallel.h"
#include "jet/engine.h"
#include "progress_bar.h"
#include "sampling_flags.h"
#include "token_ids_json.h"

namespace jet::cli {

namespace {

constexpr const char* kHelp = R"(usage: jetengine generate --model DIR (--prompt TEXT | --prompts FILE.jsonl) [options]

Prompts
  --prompt TEXT             one text prompt
  --prompts FILE            JSON lines: each a string or an array of token ids
  --chat                    wrap each text prompt as a user message in the model's chat template
  --json                    print one JSON object per prompt (text, token_ids, trajectory, logprobs,
                            entropies, completion_ids, completion_text, finish_reason, num_forwards,
                            prompt_len); default: the completion text of each prompt
  --max-active N            stream with at most N prompts in flight (default: all at once)
  --data-parallel N         run N engine processes, one on each of GPUs 0..N-1 (T each from GPU
                            rank x T with --tensor-parallel-size T; with --device cpu, N on the
                            CPU, sharing its cores); the prompts are split between them by
                            length, and the outputs come back in submission order (default 1)

)";

std::vector<Prompt> read_prompts(const ArgParser& args) {
  std::vector<Prompt> prompts;
  JET_CHECK(args.has("--prompt") != args.has("--prompts"), "give exactly one of --prompt and --prompts");
  if (auto text = args.get("--prompt")) {
    prompts.emplace_back(*text);
    return prompts;
  }
  const std::string path = args.require("--prompts");
  std::ifstream in(path);
  JET_CHECK(in, "cannot open prompts file ", path);
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error(str(path, ":", line_no, ": not valid JSON: ", e.what()));
    }
    if (j.is_string()) {
      prompts.emplace_back(j.get<std::string>());
    } else if (j.is_array()) {
      try {
        prompts.emplace_back(ids_from_json(j));
      } catch (const Error& e) {
        throw Error(str(path, ":", line_no, ": ", e.what()));
      }
    } else {
      throw Error(str(path, ":", line_no, ": expected a JSON string or an array of token ids"));
    }
  }
  return prompts;
}

nlohmann::json to_json(const GenerationOutput& out) {
  return {{"text", out.text},
          {"token_ids", out.token_ids},
          {"trajectory", out.trajectory},
          {"logprobs", out.logprobs},
          {"entropies", out.entropies},
          {"completion_ids", out.completion_ids},
          {"completion_text", out.completion_text},
          {"finish_reason", out.finish_reason},
          {"num_forwards", out.num_forwards},
          {"prompt_len", out.prompt_len}};
}

// The prompts as the engine takes them: text wrapped in the chat template when --chat.
std::vector<Prompt> engine_prompts(const ArgParser& args, const Engine& engine, std::vector<Prompt> prompts) {
  if (!args.has("--chat")) return prompts;
  for (Prompt& p : prompts) {
    const auto* text = std::get_if<std::string>(&p);
    JET_CHECK(text, "--chat needs text prompts, not token ids");
    p = engine.apply_chat_template({ChatMessage{"user", *text}});
  }
  return prompts;
}

// Decodes `prompts` on one engine; on_output(i, json) as each finishes, any order when streaming.
void decode(const ArgParser& args, Engine& engine, const std::vector<Prompt>& prompts,
            const std::function<void(size_t, const nlohmann::json&)>& on_output, const ProgressFn& progress) {
  const SamplingParams params = read_sampling(args, engine);
  const std::vector<Prompt> ready = engine_prompts(args, engine, prompts);
  if (args.has("--max-active")) {
    engine.generate_streaming(
        ready, {params}, args.get_int32("--max-active", 0),
        [&](size_t i, GenerationOutput&& out) { on_output(i, to_json(out)); }, progress);
  } else {
    const std::vector<GenerationOutput> outs = engine.generate(ready, {params}, progress);
    for (size_t i = 0; i < outs.size(); ++i) on_output(i, to_json(outs[i]));
  }
}

// What a rank costs to decode a prompt: its length (text at about 4 bytes a token) and the
// completion budget.
std::vector<int64_t> prompt_costs(const ArgParser& args, const std::vector<Prompt>& prompts) {
  const int64_t max_tokens = args.get_int32("--max-tokens", SamplingParams{}.max_tokens);
  std::vector<int64_t> costs;
  for (const Prompt& p : prompts) {
    const auto* text = std::get_if<std::string>(&p);
    costs.push_back(max_tokens + (text ? int64_t(text->size() / 4 + 1) : int64_t(std::get<1>(p).size())));
  }
  return costs;
}

// The engine names a bad prompt by its place in the list it was given ("prompt 3: ..."); a rank
// was given its share, so the place becomes the prompt's in the whole input.
std::string with_global_prompt_index(const std::string& message, const std::vector<int64_t>& share) {
  size_t local = 0, end = 0;
  if (message.rfind("prompt ", 0) != 0) return message;
  try {
    local = std::stoul(message.substr(7), &end);
  } catch (const std::exception&) {
    return message;
  }
  if (local >= share.size() || message.compare(7 + end, 1, ":") != 0) return message;
  return str("prompt ", share[local], message.substr(7 + end));
}

}  // namespace

int cmd_generate(const Args& raw) {
  ArgParser args(
      raw,
      with_sampling_value_flags(with_engine_value_flags({"--prompt", "--prompts", "--max-active", "--data-parallel"})),
      with_sampling_bool_flags(with_engine_bool_flags({"--chat", "--json", "--help"})));
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    std::fputs(kSamplingFlagsHelp, stdout);
    std::fputs(kEngineFlagsHelp, stdout);
    return 0;
  }
  const std::vector<Prompt> prompts = read_prompts(args);
  const int world = args.get_int32("--data-parallel", 1);
  JET_CHECK(world >= 1 && world <= 4096, "flag --data-parallel expects a count of engine processes >= 1, got ", world);
  const EngineOptions options = read_engine_options(args);
  if (world > 1) rank_options(options, 0, world);  // a device the ranks cannot share fails here, once

  const bool json = args.has("--json");
  ProgressBar bar(prompts.size());
  auto print = [&](const nlohmann::json& out) {
    bar.clear();  // stdout and stderr may share a terminal
    if (json) {
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    } else {
      std::cout << out["completion_text"].get<std::string>() << std::endl;
    }
  };
  // Outputs arrive as prompts finish (streaming, or from several ranks); printed in submission order.
  std::vector<std::optional<nlohmann::json>> ready(prompts.size());
  size_t next = 0;
  auto print_ready = [&] {
    for (; next < ready.size() && ready[next]; ++next) print(*ready[next]);
  };
  auto arrived = [&](size_t i, const nlohmann::json& out) {
    ready[i] = out;
    print_ready();
  };
  if (world == 1) {
    Engine engine(options);
    decode(args, engine, prompts, arrived, [&](size_t done, size_t, size_t tokens) { bar.update(done, tokens); });
    return 0;
  }
  // Without --max-active one engine prints nothing until every prompt is decoded, so a bad prompt
  // fails the run before any output; the ranks' outputs wait for every rank likewise (a rank that
  // fails may start later than another finishes).
  const bool streaming = args.has("--max-active");
  const std::vector<int64_t> costs = prompt_costs(args, prompts);
  std::vector<std::pair<size_t, size_t>> progress(world);  // each rank's prompts done and tokens
  run_data_parallel(
      world,
      [&](int rank, const RankChannel& channel) {
        const std::vector<int64_t> share = data_parallel_share(costs, world, rank);
        if (share.empty()) return;  // more ranks than prompts
        Engine engine(rank_options(options, rank, world));
        std::vector<Prompt> mine;
        for (int64_t i : share) mine.push_back(prompts[size_t(i)]);
        try {
          decode(
              args, engine, mine,
              [&](size_t i, const nlohmann::json& out) {
                channel.send({{"index", share[i]}, {"output", out}});
              },
              [&](size_t done, size_t, size_t tokens) {
                channel.send({{"done", done}, {"tokens", tokens}});
              });
        } catch (const Error& e) {
          throw Error(with_global_prompt_index(e.what(), share));
        }
      },
      [&](int rank, const nlohmann::json& message) {
        if (message.contains("output")) {
          const size_t i = message["index"].get<size_t>();
          if (streaming) {
            arrived(i, message["output"]);
          } else {
            ready[i] = message["output"];
          }
          return;
        }
        progress[rank] = {message["done"].get<size_t>(), message["tokens"].get<size_t>()};
        size_t done = 0, tokens = 0;
        for (const auto& [d, t] : progress) done += d, tokens += t;
        bar.update(done, tokens);
      });
  print_ready();
  JET_CHECK(next == prompts.size(), "--data-parallel: ", prompts.size() - next, " outputs never arrived");
  return 0;
}

}  // namespace jet::cli
