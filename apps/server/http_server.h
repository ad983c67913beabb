// `jetengine serve`: an OpenAI-compatible HTTP server over one Engine. HTTP requests are read
// asynchronously (HttpTransport, http_transport.h) and queued; the engine runs on the thread that
// calls serve(), taking queued requests into its running batch before every step (Engine::serve:
// continuous batching) and handing each one's text and output to its connection's Exchange.
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions (both with "stream": true for
// server-sent events, one event per step that commits text), GET /v1/models[/{id}], POST
// /tokenize and /detokenize, GET /health, GET /metrics (Prometheus text). A bad request gets a
// 4xx JSON error and changes nothing else.
// Optional bearer-key authentication of the /v1/ routes; CORS headers and preflight answers.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "jet/engine.h"

namespace jet::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                   // 0: any free port (listen() returns it)
  int max_active = 0;                // requests decoded together at most; <= 0: the engine's max_num_seqs
  std::string model_name;            // what /v1/models lists and responses carry
  SamplingParams defaults;           // for the fields a request leaves out
  std::string api_key;               // when set, /v1/ routes need "Authorization: Bearer <api_key>" (else 401)
  std::string allowed_origin = "*";  // CORS: Access-Control-Allow-Origin of every answer; "" = none
  // Against clients that hold connections without using them:
  double read_timeout = 30;   // seconds to send one request, header and body; then the connection closes
  double write_timeout = 30;  // seconds a write may wait for the client to take bytes; then it is dropped
  int max_connections = 512;  // open at most; a newcomer then evicts the longest-waiting reader, else 503
  size_t max_pending_bytes = size_t{1} << 20;  // a stream's bytes the client has not taken; more: dropped
  // The bytes that requests over 64 KiB may hold together while they are read (until their answer
  // begins); a read past it gets 503 and closes its connection. Smaller requests are not counted.
  size_t max_buffered_bytes = size_t{1} << 30;
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
