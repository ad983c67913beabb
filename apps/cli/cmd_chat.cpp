// `jetengine chat`: a conversation on the terminal. Each line on stdin is a user message; the
// reply is rendered through the model's chat template with the turns so far and printed as its
// blocks commit (Engine::serve's streamed text), then joins the history.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "arg_parser.h"
#include "commands.h"
#include "engine_flags.h"
#include "jet/engine.h"
#include "sampling_flags.h"

namespace jet::cli {

namespace {

constexpr const char* kHelp = R"(usage: jetengine chat --model DIR [options]

Reads one user message per line from stdin and prints each reply as it is decoded; the
conversation is kept, so later messages see the earlier turns. Commands: /reset starts a new
conversation, /exit (or end of input) quits. Prompts ("> ") go to stderr when stdin is a terminal.
A message the engine rejects (for example once the conversation outgrows --max-model-len) gets
an error on stderr and is dropped; the conversation goes on.

Conversation
  --system TEXT             a system message opening every conversation
  --no-thinking             pass enable_thinking = false to the template (models that reason aloud)

)";

// Decodes one reply, writing its text to stdout as it commits; returns the whole reply, or
// throws with the engine's reason when the request is rejected (e.g. the conversation has
// outgrown max_model_len).
std::string reply(Engine& engine, const std::string& prompt, const SamplingParams& params) {
  std::string text, error;
  bool handed_over = false;
  engine.serve(
      [&](size_t, bool, std::vector<ServeRequest>& out) {
        if (!handed_over) {
          ServeRequest request;
          request.prompt = prompt;
          request.params = params;
          request.on_text = [](const std::string& piece) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
          };
          request.on_output = [&](GenerationOutput&& output) { text = std::move(output.completion_text); };
          request.on_error = [&](const std::string& message) { error = message; };
          out.push_back(std::move(request));
          handed_over = true;
        }
        return false;  // one request, then stop once it has finished
      },
      1);
  JET_CHECK(error.empty(), error);
  std::fputc('\n', stdout);
  return text;
}

}  // namespace

int cmd_chat(const Args& raw) {
  ArgParser args(raw, with_sampling_value_flags(with_engine_value_flags({"--system"})),
                 with_sampling_bool_flags(with_engine_bool_flags({"--no-thinking", "--help"})));
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    std::fputs(kSamplingFlagsHelp, stdout);
    std::fputs(kEngineFlagsHelp, stdout);
    return 0;
  }
  Engine engine(read_engine_options(args));
  const SamplingParams params = read_sampling(args, engine);
  ChatTemplateOptions template_options;
  if (args.has("--no-thinking")) template_options.enable_thinking = false;
  std::vector<ChatMessage> opening;
  if (auto system = args.get("--system")) opening.push_back(ChatMessage{"system", *system});
  // The template is needed before the first message: a model folder without one fails here.
  engine.apply_chat_template(opening, template_options);

  const bool interactive = isatty(fileno(stdin));
  std::vector<ChatMessage> messages = opening;
  std::string line;
  for (;;) {
    if (interactive) std::fputs("> ", stderr);
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF input
    if (line == "/exit") break;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line == "/reset") {
      messages = opening;
      continue;
    }
    messages.push_back(ChatMessage{"user", line});
    try {
      const std::string prompt = engine.apply_chat_template(messages, template_options);
      messages.push_back(ChatMessage{"assistant", reply(engine, prompt, params)});
    } catch (const Error& e) {  // this message is dropped; the conversation goes on without it
      messages.pop_back();
      std::fprintf(stderr, "jetengine chat: error: %s (/reset starts a new conversation)\n", e.what());
    }
  }
  return 0;
}

}  // namespace jet::cli
