// `jetengine serve`: the OpenAI-compatible HTTP server (apps/server) over one engine, until
// Ctrl-C or SIGTERM, after which the requests in flight finish.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <utility>

#include "arg_parser.h"
#include "commands.h"
#include "core/log.h"
#include "engine_flags.h"
#include "http_server.h"
#include "sampling_flags.h"

namespace jet::cli {

namespace {

constexpr const char* kHelp = R"(usage: jetengine serve --model DIR [--host H] [--port P] [options]

An OpenAI-compatible HTTP server: POST /v1/completions and /v1/chat/completions ("stream": true
for server-sent events), GET /v1/models, /health and /metrics, POST /tokenize and /detokenize.
Requests join the running batch as they arrive. A request's fields are OpenAI's (prompt or
messages, max_tokens, temperature, top_p, seed, stream) plus the engine's sampling fields under
their SamplingParams names (top_k, repetition_penalty, ignore_eos, stop_token_ids,
denoising_steps, sub_block_length, editing_threshold, max_post_steps, remasking_strategy,
dynamic_threshold, dynamic_factor, eb_threshold, diversity_enforce_barrier, epsilon_greedy); see
the README.

Server
  --host H                  address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)
  --port P                  (default 8000; 0 picks a free port, printed at start)
  --max-active N            requests decoded together at most (default: --max-num-seqs)
  --served-model-name NAME  the model name the API reports (default: the model folder's name)
  --api-key KEY             the /v1/ routes need "Authorization: Bearer KEY" (default: the
                            JETENGINE_API_KEY environment variable; unset: no key)
  --allowed-origin ORIGIN   CORS: the Access-Control-Allow-Origin of every answer (default *;
                            "" sends none)
  --read-timeout S          seconds a client has to send one request, header and body; a slower
                            one is disconnected (default 30)
  --write-timeout S         seconds a client may leave the server's bytes untaken; then it is
                            disconnected and its request cancelled (default 30)
  --max-connections N       open connections at most (default 512); a newcomer past that closes
                            the one that has waited longest for its request, else gets 503 with Retry-After
  --max-buffered-mb M       MiB that requests over 64 KiB may hold together while they are read
                            (default 1024, at least 32); a request that would pass it gets 503
                            with Retry-After and its connection closes. Smaller requests are not
                            counted, so they are read whatever the large ones hold

)";

std::atomic<bool> g_stop_requested{false};

void request_stop(int) { g_stop_requested = true; }

}  // namespace

int cmd_serve(const Args& raw) {
  ArgParser args(raw,
                 with_engine_value_flags({"--host", "--port", "--max-active", "--served-model-name", "--api-key",
                                          "--allowed-origin", "--read-timeout", "--write-timeout", "--max-connections",
                                          "--max-buffered-mb"}),
                 with_engine_bool_flags({"--help"}));
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    std::fputs(kEngineFlagsHelp, stdout);
    return 0;
  }
  server::ServerOptions options;
  // The connection limits are checked before the model loads, which can take minutes.
  options.read_timeout = args.get_double("--read-timeout", options.read_timeout);
  options.write_timeout = args.get_double("--write-timeout", options.write_timeout);
  for (const auto& [flag, seconds] :
       {std::pair{"--read-timeout", options.read_timeout}, std::pair{"--write-timeout", options.write_timeout}}) {
    JET_CHECK(seconds > 0 && seconds <= 86400, flag, " must be in (0, 86400] seconds, got ", seconds);
  }
  options.max_connections = args.get_int32("--max-connections", options.max_connections);
  JET_CHECK(options.max_connections >= 1, "--max-connections must be at least 1, got ", options.max_connections);
  // Below two bodies of the largest size (16 MiB), one such body with its header might never fit.
  const int buffered_mb = args.get_int32("--max-buffered-mb", static_cast<int>(options.max_buffered_bytes >> 20));
  JET_CHECK(buffered_mb >= 32, "--max-buffered-mb must be at least 32 (twice the 16 MiB body limit), got ",
            buffered_mb);
  options.max_buffered_bytes = static_cast<size_t>(buffered_mb) << 20;
  Engine engine(read_engine_options(args));
  options.host = args.get("--host").value_or(options.host);
  options.port = args.get_int32("--port", options.port);
  JET_CHECK(options.port >= 0 && options.port <= 65535, "--port must be in [0, 65535], got ", options.port);
  options.max_active = args.get_int32("--max-active", 0);
  // The default name is the model folder's: "models/sdar-tiny-arith/" names sdar-tiny-arith too.
  std::filesystem::path folder = std::filesystem::path(args.require("--model")).lexically_normal();
  if (folder.filename().empty()) folder = folder.parent_path();
  options.model_name = args.get("--served-model-name").value_or(folder.filename().string());
  if (options.model_name.empty()) options.model_name = args.require("--model");
  options.defaults.denoising_steps = default_denoising_steps(engine);  // as generate's
  const char* key_from_env = std::getenv("JETENGINE_API_KEY");
  options.api_key = args.get("--api-key").value_or(key_from_env ? key_from_env : "");
  options.allowed_origin = args.get("--allowed-origin").value_or(options.allowed_origin);

  server::HttpServer server(engine, options);
  const int port = server.listen();
  log_info("serving ", options.model_name, " on http://", options.host, ":", port, " (Ctrl-C stops)");
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  std::thread watcher([&] {
    while (!g_stop_requested) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log_info("stopping: the requests in flight finish first");
    server.stop();
  });
  try {
    server.serve();
  } catch (...) {
    g_stop_requested = true;
    watcher.join();
    throw;
  }
  g_stop_requested = true;
  watcher.join();
  return 0;
}

}  // namespace jet::cli
