// `jetengine generate`: prompts from a flag or a JSON-lines file, sampling flags, text or JSON out.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "arg_parser.h"
#include "commands.h"
#include "engine_flags.h"
#include "jet/engine.h"
#include "progress_bar.h"

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

Sampling (docs/decoding.md)
  --temperature T           0 = greedy (default 1.0)
  --top-k K                 0 = off (default 0)
  --top-p P                 in (0, 1], 1 = off (default 1.0)
  --repetition-penalty R    (default 1.0 = off)
  --max-tokens N            completion tokens at most (default 64)
  --denoising-steps S       steps per block, 1..B (default 4, capped at B)
  --strategy NAME           remasking strategy (default low_confidence_static); one of
                            sequential, anti_sequential, random, dilated, low_confidence_static,
                            margin_static, entropy_static, low_confidence_dynamic, dynamic_factor,
                            dynamic_pmax, entropy_bounded
  --dynamic-threshold X     low_confidence_dynamic / dynamic_pmax threshold (default 0.9)
  --dynamic-factor X        dynamic_factor's factor (default 1.0)
  --eb-threshold X          entropy_bounded's entropy budget (default 0.35)
  --seed N                  reproducible sampling
  --stop-token-ids A,B,...  extra stop tokens
  --ignore-eos              do not stop at the model's EOS tokens

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
    } else if (j.is_array() && std::all_of(j.begin(), j.end(), [](const auto& v) { return v.is_number_integer(); })) {
      prompts.emplace_back(j.get<std::vector<int32_t>>());
    } else {
      throw Error(str(path, ":", line_no, ": expected a JSON string or an array of token ids"));
    }
  }
  return prompts;
}

SamplingParams read_sampling(const ArgParser& args) {
  SamplingParams p;
  p.temperature = args.get_double("--temperature", p.temperature);
  p.top_k = static_cast<int>(args.get_int("--top-k", p.top_k));
  p.top_p = args.get_double("--top-p", p.top_p);
  p.repetition_penalty = args.get_double("--repetition-penalty", p.repetition_penalty);
  p.max_tokens = static_cast<int>(args.get_int("--max-tokens", p.max_tokens));
  p.denoising_steps = static_cast<int>(args.get_int("--denoising-steps", p.denoising_steps));
  p.remasking_strategy = args.get("--strategy").value_or(p.remasking_strategy);
  p.dynamic_threshold = args.get_double("--dynamic-threshold", p.dynamic_threshold);
  p.dynamic_factor = args.get_double("--dynamic-factor", p.dynamic_factor);
  p.eb_threshold = args.get_double("--eb-threshold", p.eb_threshold);
  p.ignore_eos = args.has("--ignore-eos");
  if (args.has("--seed")) p.seed = static_cast<uint64_t>(args.get_int("--seed", 0));
  if (auto ids = args.get("--stop-token-ids")) {
    std::stringstream ss(*ids);
    for (std::string item; std::getline(ss, item, ',');) {
      try {
        p.stop_token_ids.push_back(std::stoi(item));
      } catch (...) {
        throw Error(str("--stop-token-ids expects comma-separated integers, got '", *ids, "'"));
      }
    }
  }
  return p;
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

}  // namespace

int cmd_generate(const Args& raw) {
  ArgParser args(raw,
                 with_engine_value_flags({"--prompt", "--prompts", "--max-active", "--temperature", "--top-k",
                                          "--top-p", "--repetition-penalty", "--max-tokens", "--denoising-steps",
                                          "--strategy", "--dynamic-threshold", "--dynamic-factor", "--eb-threshold",
                                          "--seed", "--stop-token-ids"}),
                 with_engine_bool_flags({"--chat", "--json", "--ignore-eos", "--help"}));
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    std::fputs(kEngineFlagsHelp, stdout);
    return 0;
  }
  std::vector<Prompt> prompts = read_prompts(args);
  SamplingParams params = read_sampling(args);
  Engine engine(read_engine_options(args));
  if (params.denoising_steps > engine.summary().block_length && !args.has("--denoising-steps")) {
    params.denoising_steps = engine.summary().block_length;  // the default 4 when B < 4
  }
  if (args.has("--chat")) {
    for (Prompt& p : prompts) {
      const auto* text = std::get_if<std::string>(&p);
      JET_CHECK(text, "--chat needs text prompts, not token ids");
      p = engine.apply_chat_template({ChatMessage{"user", *text, ""}});
    }
  }

  const bool json = args.has("--json");
  ProgressBar bar(prompts.size());
  auto print = [&](const GenerationOutput& out) {
    if (json) {
      std::cout << to_json(out).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    } else {
      std::cout << out.completion_text << '\n';
    }
  };
  auto progress = [&](size_t done, size_t, size_t tokens) { bar.update(done, tokens); };
  if (args.has("--max-active")) {
    // Streaming: outputs arrive as prompts finish; print them in submission order anyway.
    std::vector<std::optional<GenerationOutput>> ready(prompts.size());
    size_t next = 0;
    engine.generate_streaming(
        prompts, {params}, static_cast<int>(args.get_int("--max-active", 0)),
        [&](size_t i, GenerationOutput&& out) {
          ready[i] = std::move(out);
          for (; next < ready.size() && ready[next]; ++next) print(*ready[next]);
        },
        progress);
  } else {
    for (const GenerationOutput& out : engine.generate(prompts, {params}, progress)) print(out);
  }
  return 0;
}

}  // namespace jet::cli
