// HttpTransport: the network side of `jetengine serve` (HTTP/1.1 over TCP, Boost.Beast in
// http_transport.cpp). It accepts connections, reads each request under a deadline and within
// size limits, hands it to the routes with an Exchange for the answer, and writes that answer back,
// one request at a time per connection (so pipelined requests are answered in order). It holds
// the line against hostile clients: a bounded number of connections where the slowest reader
// makes room for a newcomer, a budget for the request bytes all connections hold while they read
// (past it a request gets 503), and a write deadline and a cap on unsent bytes that drop a client
// which stops reading. It knows nothing of the API: routes and error bodies come from the caller.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "http_exchange.h"

namespace jet::server {

struct ServerOptions;

class HttpTransport {
 public:
  // Called on a connection's thread for every well-formed request; must not block (offload()
  // work that may). The connection reads its next request only once the exchange is answered.
  using Handler = std::function<void(HttpRequest&& request, std::shared_ptr<Exchange> exchange)>;
  // The answer to a request the transport refuses itself (400, 413, 431, 503), from its status
  // and a message saying why.
  using ErrorResponder = std::function<HttpResponse(int status, const std::string& message)>;

  HttpTransport(const ServerOptions& options, Handler handler, ErrorResponder error_response);
  ~HttpTransport();  // close()
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds options.host:options.port (0: any free port) and starts answering; returns the port.
  // Throws jet::Error when the address cannot be bound.
  int listen();
  // Runs `work` on the pool of worker threads (handlers that parse, tokenize or wait).
  void offload(std::function<void()> work);
  // Thread-safe: the connections open now, and the bytes of requests being read that count
  // against options.max_buffered_bytes (those of requests over 64 KiB, until their answer begins).
  size_t connections() const;
  size_t buffered_bytes() const;
  // Stops accepting, closes the connections waiting for a request, and lets those writing an
  // answer finish it (up to `grace`); then close().
  void shutdown(std::chrono::milliseconds grace);
  // Closes every connection now and stops the threads. Idempotent.
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace jet::server
