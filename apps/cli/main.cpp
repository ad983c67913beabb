// The `jetengine` command line: dispatches a verb to its cmd_* function; errors become exit code 1.
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "commands.h"
#include "core/error.h"

namespace {

constexpr const char* kUsage =
    "usage: jetengine <verb> [options]\n"
    "verbs:\n"
    "  tokenize   --model DIR [--jsonl]   text on stdin -> token ids (JSON)\n"
    "  detokenize --model DIR [--jsonl] [--skip-special-tokens]   ids (JSON) on stdin -> text\n"
    "  inspect    --model DIR             config summary, parameter count, validation\n"
    "  generate   --model DIR (--prompt TEXT | --prompts FILE) [--chat] [--json] [sampling flags]\n"
    "  chat       --model DIR [--system TEXT] [sampling flags]   a conversation on stdin/stdout\n"
    "  bench      --model DIR [--batches 1,16] [--mode2 N] [--profile]   completion tokens/s\n"
    "  serve      --model DIR [--host H] [--port P]   OpenAI-compatible HTTP server\n"
    "run 'jetengine <verb> --help' for the options of a verb\n";

}  // namespace

int main(int argc, char** argv) {
  using Verb = int (*)(const jet::cli::Args&);
  const std::map<std::string, Verb> verbs = {
      {"tokenize", jet::cli::cmd_tokenize}, {"detokenize", jet::cli::cmd_detokenize},
      {"inspect", jet::cli::cmd_inspect},   {"generate", jet::cli::cmd_generate},
      {"chat", jet::cli::cmd_chat},         {"bench", jet::cli::cmd_bench},
#ifdef JET_HAVE_SERVER
      {"serve", jet::cli::cmd_serve},
#else
      {"serve",
       [](const jet::cli::Args&) -> int {
         throw jet::Error("this jetengine was built without the HTTP server: install libcpp-httplib-dev and "
                          "configure with -DJET_SERVER=ON");
       }},
#endif
  };
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  auto it = verbs.find(argv[1]);
  if (it == verbs.end()) {
    std::fprintf(stderr, "jetengine: unknown verb '%s'\n%s", argv[1], kUsage);
    return 2;
  }
  try {
    return it->second(jet::cli::Args(argv + 2, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jetengine %s: error: %s\n", argv[1], e.what());
    return 1;
  }
}
