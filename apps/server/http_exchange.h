// One HTTP request as the routes see it (HttpRequest), the answer they give (HttpResponse), and the
// Exchange through which that answer goes back to the client: whole, or as a stream of chunks.
// Nothing here names the network library, so the routes compile without it (http_transport.cpp
// holds the Boost.Beast side).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jet::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query, percent-decoded
  HttpHeaders headers;
  std::string body;

  // The value of the first header named `name` (any case), or "".
  std::string header(std::string_view name) const {
    for (const auto& [key, value] : headers) {
      if (key.size() != name.size()) continue;
      size_t i = 0;
      while (i < key.size() && ascii_lower(key[i]) == ascii_lower(name[i])) ++i;
      if (i == key.size()) return value;
    }
    return {};
  }

 private:
  static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
};

struct HttpResponse {
  int status = 200;
  std::string content_type;  // "" sends no Content-Type (a 204)
  std::string body;          // ignored by Exchange::stream_begin
  HttpHeaders headers;       // besides Content-Type, Content-Length and Connection
};

// The way back to one request's client. Every method is thread-safe and returns at once: the bytes
// are written by the connection's own thread later. An answer is respond(), or stream_begin(),
// any number of stream_write() and stream_end(); calls after the answer, or after the client is
// gone, do nothing.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void respond(HttpResponse response) = 0;
  // Sends the status and headers of a response whose body follows in pieces (chunked encoding).
  virtual void stream_begin(HttpResponse head) = 0;
  virtual void stream_write(std::string data) = 0;
  virtual void stream_end() = 0;
  // Whether the client can no longer get the answer: it closed the connection, stopped reading a
  // stream (write deadline, or more unsent bytes than the cap), was evicted, or the server closed.
  virtual bool gone() const = 0;
};

}  // namespace jet::server
