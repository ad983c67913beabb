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

}  // namespace

int cmd_generate(const Args& raw) {
  ArgParser args(raw, with_sampling_value_flags(with_engine_value_flags({"--prompt", "--prompts", "--max-active"})),
                 with_sampling_bool_flags(with_engine_bool_flags({"--chat", "--json", "--help"})));
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    std::fputs(kSamplingFlagsHelp, stdout);
    std::fputs(kEngineFlagsHelp, stdout);
    return 0;
  }
  std::vector<Prompt> prompts = read_prompts(args);
  Engine engine(read_engine_options(args));
  const SamplingParams params = read_sampling(args, engine);
  if (args.has("--chat")) {
    for (Prompt& p : prompts) {
      const auto* text = std::get_if<std::string>(&p);
      JET_CHECK(text, "--chat needs text prompts, not token ids");
      p = engine.apply_chat_template({ChatMessage{"user", *text}});
    }
  }

  const bool json = args.has("--json");
  ProgressBar bar(prompts.size());
  auto print = [&](const GenerationOutput& out) {
    bar.clear();  // stdout and stderr may share a terminal
    if (json) {
      std::cout << to_json(out).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    } else {
      std::cout << out.completion_text << std::endl;
    }
  };
  auto progress = [&](size_t done, size_t, size_t tokens) { bar.update(done, tokens); };
  if (args.has("--max-active")) {
    // Streaming: outputs arrive as prompts finish; print them in submission order anyway.
    std::vector<std::optional<GenerationOutput>> ready(prompts.size());
    size_t next = 0;
    engine.generate_streaming(
        prompts, {params}, args.get_int32("--max-active", 0),
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
