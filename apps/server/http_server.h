// `jetengine serve`: an OpenAI-compatible HTTP server over one Engine. HTTP requests are read on a
// pool of threads (cpp-httplib) and queued; the engine runs on the thread that calls serve(),
// taking queued requests into its running batch before every step (Engine::serve: continuous
// batching) and handing each one's text and output back to the thread that waits for it.
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions (both with "stream": true for
// server-sent events, one event per step that commits text), GET /v1/models[/{id}], POST
// /tokenize and /detokenize, GET /health, GET /metrics (Prometheus text). A bad request gets a
// 4xx JSON error and changes nothing else.
// Optional bearer-key authentication of the /v1/ routes; CORS headers and preflight answers.
#pragma once

#include <memory>
#include <string>

#include "jet/engine.h"

namespace jet::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;          // 0: any free port (listen() returns it)
  int max_active = 0;       // requests decoded together at most; <= 0: the engine's max_num_seqs
  std::string model_name;   // what /v1/models lists and responses carry
  SamplingParams defaults;  // for the fields a request leaves out
  std::string api_key;      // when set, /v1/ routes need "Authorization: Bearer <api_key>" (else 401)
  std::string allowed_origin = "*";  // CORS: Access-Control-Allow-Origin of every answer; "" = none
};

class HttpServer {
 public:
  HttpServer(Engine& engine, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts answering HTTP (requests wait in the queue until serve() runs); returns the
  // port. Throws jet::Error when the address cannot be bound.
  int listen();
  // Runs the engine on this thread until stop(): the requests in flight then finish, those still
  // queued are answered 503, and once the last response is written the HTTP side stops.
  void serve();
  // Thread-safe: makes serve() return once the requests in flight are answered.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace jet::server
