// HttpServer (http_server.h): routes, the request queue between the HTTP threads and the engine
// thread, the per-request reply channel, and the metrics.
#include "http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"
#include "openai_api.h"

namespace jet::server {

namespace {

using nlohmann::json;

// Each waiting request holds an HTTP thread, so the pool bounds the requests in flight.
constexpr int kHttpThreads = 256;
constexpr size_t kMaxBodyBytes = size_t{16} << 20;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void respond_error(httplib::Response& res, int status, const std::string& message) {
  const char* type = status == 404   ? "not_found_error"
                     : status == 503 ? "unavailable"
                     : status < 500  ? "invalid_request_error"
                                     : "server_error";
  res.status = status;
  res.set_content(dump(error_body(message, type, status)), "application/json");
}

// One request's way back from the engine thread to the HTTP thread that waits for it.
class Reply {
 public:
  void text(const std::string& text) {
    std::lock_guard lock(mutex_);
    texts_.push_back(text);
    changed_.notify_all();
  }
  void output(GenerationOutput&& out) {
    std::lock_guard lock(mutex_);
    output_ = std::move(out);
    done_ = true;
    changed_.notify_all();
  }
  void fail(const std::string& message, int status) {
    std::lock_guard lock(mutex_);
    if (done_) return;
    error_ = message;
    status_ = status;
    done_ = true;
    changed_.notify_all();
  }
  // Waits until there is new text or the request is over; moves the new text into `texts`.
  // Returns whether it is over (its text then all delivered).
  bool wait(std::vector<std::string>& texts) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !texts_.empty() || done_; });
    for (std::string& t : texts_) texts.push_back(std::move(t));
    texts_.clear();
    return done_;
  }
  // The client went away: the engine drops the request at its next step.
  void abandon() { abandoned_ = true; }
  bool abandoned() const { return abandoned_; }
  // After wait() returned true.
  bool failed() const { return status_ != 0; }
  int status() const { return status_; }
  const std::string& error() const { return error_; }
  const GenerationOutput& output() const { return output_; }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> texts_;
  GenerationOutput output_;
  std::string error_;
  int status_ = 0;
  bool done_ = false;
  std::atomic<bool> abandoned_{false};
};

// Reads the request body through a ContentReader (httplib's own read caps a body sent as
// application/x-www-form-urlencoded, what `curl -d` sends, at 8 KiB, with an empty 413). False
// when the body is larger than kMaxBodyBytes or the connection broke.
bool read_body(const httplib::ContentReader& read, std::string& body) {
  return read([&body](const char* data, size_t size) {
    if (body.size() + size > kMaxBodyBytes) return false;
    body.append(data, size);
    return true;
  });
}

// Whether the request's Content-Length is no byte count (-1, 1e3, abc): httplib reads such a
// header as a huge length (413) or as its leading digits (1e3: one byte), so the answer would
// not name the real fault.
bool bad_content_length(const httplib::Request& req) {
  const std::string length = req.get_header_value("Content-Length");
  return !length.empty() && length.find_first_not_of("0123456789") != std::string::npos;
}

// What a 4xx / 5xx that httplib answers itself (before any route runs) means, for its JSON body.
std::string status_message(const httplib::Request& req, int status) {
  if ((status == 400 || status == 413) && bad_content_length(req)) {
    return "the Content-Length header '" + req.get_header_value("Content-Length").substr(0, 40) +
           "' is not a byte count";
  }
  switch (status) {
    case 400: return "malformed HTTP request";
    case 404: return "no route " + req.method + " " + req.path;
    case 405: return "method " + req.method + " is not allowed on " + req.path;
    case 413: return str("the request body exceeds ", kMaxBodyBytes >> 20, " MiB (or its connection broke)");
    case 414: return "the request URI is too long";
    default: return str("HTTP status ", status);
  }
}

// A TCP option set: address reuse, for a quick restart on the same port, and nothing more. (httplib's
// default also sets SO_REUSEPORT, which lets a second server bind the same port silently and take
// half of its connections.)
void reuse_address(socket_t sock) {
  const int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

bool send_event(httplib::DataSink& sink, const std::string& data) {
  const std::string event = "data: " + data + "\n\n";
  return sink.write(event.data(), event.size());
}

}  // namespace

struct HttpServer::Impl {
  Engine& engine;
  ServerOptions options;
  httplib::Server http;
  std::thread listener;

  std::mutex mutex;  // guards queue, in_flight, stopping
  std::condition_variable queued;
  std::deque<std::pair<ServeRequest, std::shared_ptr<Reply>>> queue;
  std::set<std::shared_ptr<Reply>> in_flight;  // taken by the engine, not finished
  bool stopping = false;

  std::atomic<uint64_t> next_id{0}, ok{0}, rejected{0}, aborted{0}, prompt_tokens{0}, completion_tokens{0};

  // Generate responses still being written (a stream's events outlive its handler): serve() waits
  // for them before it stops the HTTP side, so a stop never cuts a stream in flight.
  int open_responses = 0;  // guarded by mutex
  std::condition_variable responses_closed;
  struct OpenResponse {
    Impl& s;
    explicit OpenResponse(Impl& server) : s(server) {
      std::lock_guard lock(s.mutex);
      ++s.open_responses;
    }
    ~OpenResponse() {
      std::lock_guard lock(s.mutex);
      --s.open_responses;
      s.responses_closed.notify_all();
    }
  };

  std::set<std::string> routed_paths;  // filled by routes(), then only read
  const int64_t started = static_cast<int64_t>(std::time(nullptr));  // /v1/models' "created"
  // Response ids are this server's random prefix and a counter: unique across restarts too.
  const std::string id_prefix = [] {
    std::random_device entropy;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%08x%08x", entropy(), entropy());
    return std::string(hex);
  }();

  Impl(Engine& e, ServerOptions o) : engine(e), options(std::move(o)) {}

  void routes();
  void generate(Endpoint endpoint, const std::string& body, httplib::Response& res);
  bool take(size_t room, bool idle, std::vector<ServeRequest>& out);
  void finished(const std::shared_ptr<Reply>& reply) {
    std::lock_guard lock(mutex);
    in_flight.erase(reply);
  }
  std::string metrics();
  json model_entry() const {
    return {{"id", options.model_name}, {"object", "model"}, {"created", started}, {"owned_by", "jetengine"}};
  }
};

// Whether `given` equals `expected`, in time that depends on their lengths only.
bool same_key(const std::string& given, const std::string& expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) diff |= given[i] ^ expected[i % std::max<size_t>(expected.size(), 1)];
  return diff == 0 && !expected.empty();
}

void HttpServer::Impl::routes() {
  http.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
  // Before any route: CORS headers (and preflight answers), then the API key of the /v1/ routes.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!options.allowed_origin.empty()) res.set_header("Access-Control-Allow-Origin", options.allowed_origin);
    if (req.method == "OPTIONS") {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!options.api_key.empty() && req.path.rfind("/v1/", 0) == 0 &&
        !same_key(req.get_header_value("Authorization"), "Bearer " + options.api_key)) {
      ++rejected;
      respond_error(res, 401, "this server needs an API key: send 'Authorization: Bearer <key>'");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_payload_max_length(kMaxBodyBytes);
  auto post = [this](const char* path, std::function<void(const std::string& body, httplib::Response&)> handle) {
    routed_paths.insert(path);
    http.Post(path, [this, handle = std::move(handle)](const httplib::Request& req, httplib::Response& res,
                                                       const httplib::ContentReader& read) {
      std::string body;
      if (bad_content_length(req)) {
        ++rejected;
        return respond_error(res, 400, status_message(req, 400));
      }
      if (!read_body(read, body)) {
        ++rejected;
        return respond_error(res, 413, status_message(req, 413));
      }
      handle(body, res);
    });
  };
  for (const auto& [path, endpoint] : {std::pair{"/v1/completions", Endpoint::Completions},
                                       std::pair{"/v1/chat/completions", Endpoint::ChatCompletions}}) {
    post(path, [this, endpoint = endpoint](const std::string& body, httplib::Response& res) {
      generate(endpoint, body, res);
    });
  }
  // The tokenizer's answers need no engine step: they are made on the connection's thread.
  auto tokenizer_route = [this, &post](const char* path, nlohmann::json (*answer)(const std::string&, const Engine&)) {
    post(path, [this, answer](const std::string& body, httplib::Response& res) {
      try {
        res.set_content(dump(answer(body, engine)), "application/json");
      } catch (const Error& e) {
        ++rejected;
        respond_error(res, 400, e.what());
      }
    });
  };
  tokenizer_route("/tokenize", tokenize_response);
  tokenizer_route("/detokenize", detokenize_response);
  auto get = [this](const char* path, httplib::Server::Handler handler) {
    routed_paths.insert(path);
    http.Get(path, std::move(handler));
  };
  get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump({{"object", "list"}, {"data", json::array({model_entry()})}}), "application/json");
  });
  http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != options.model_name) {
      return respond_error(res, 404, "the model '" + req.matches[1].str().substr(0, 200) + "' does not exist");
    }
    res.set_content(dump(model_entry()), "application/json");
  });
  get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics(), "text/plain; version=0.0.4");
  });
  // Every error gets a JSON body; a routed path asked with another method is a 405.
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404 && routed_paths.count(req.path)) res.status = 405;
    if (res.status == 413 && bad_content_length(req)) res.status = 400;
    respond_error(res, res.status, status_message(req, res.status));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
    std::string message = "internal error";
    try {
      if (e) std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      message = ex.what();
    } catch (...) {
    }
    respond_error(res, 500, message);
  });
}

void HttpServer::Impl::generate(Endpoint endpoint, const std::string& body, httplib::Response& res) {
  const auto open = std::make_shared<OpenResponse>(*this);
  ParsedRequest parsed;
  try {
    parsed = parse_request(endpoint, body, engine, options.defaults);
    // Tokenized here, on this connection's thread (Tokenizer::encode is thread-safe): on the engine
    // thread a long text prompt would hold up every request decoding there.
    if (const auto* text = std::get_if<std::string>(&parsed.prompt)) parsed.prompt = engine.tokenizer().encode(*text);
  } catch (const Error& e) {
    ++rejected;
    return respond_error(res, 400, e.what());
  }
  if (parsed.model && *parsed.model != options.model_name) {
    ++rejected;
    return respond_error(res, 404, "the model '" + parsed.model->substr(0, 200) + "' does not exist; this server serves '" +
                                       options.model_name + "'");
  }
  auto reply = std::make_shared<Reply>();
  ServeRequest request;
  request.prompt = std::move(parsed.prompt);
  request.params = parsed.params;
  if (parsed.stream) request.on_text = [reply](const std::string& text) { reply->text(text); };
  request.cancelled = [reply] { return reply->abandoned(); };
  // The counts first, then the reply: whoever the reply wakes sees metrics that include it.
  request.on_output = [this, reply](GenerationOutput&& out) {
    ++(out.finish_reason == "abort" ? aborted : ok);
    prompt_tokens += out.prompt_len;
    completion_tokens += out.completion_ids.size();
    finished(reply);
    reply->output(std::move(out));
  };
  request.on_error = [this, reply](const std::string& error) {
    ++rejected;
    finished(reply);
    reply->fail(error, 400);
  };
  {
    std::lock_guard lock(mutex);
    if (stopping) return respond_error(res, 503, "the server is shutting down");
    queue.emplace_back(std::move(request), reply);
  }
  queued.notify_one();

  const std::string id =
      (endpoint == Endpoint::Completions ? "cmpl-" : "chatcmpl-") + id_prefix + "-" + std::to_string(next_id++);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  // A streamed response too waits for its first event, so a request the engine rejects still gets
  // its 4xx status rather than an event stream. (Without on_text the first event is the end.)
  std::vector<std::string> texts;
  const bool done = reply->wait(texts);
  if (done && reply->failed()) return respond_error(res, reply->status(), reply->error());
  if (!parsed.stream) {
    res.set_content(dump(completion_response(endpoint, id, created, options.model_name, reply->output())),
                    "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, open, reply, endpoint, id, created, texts = std::move(texts), done = done,
       include_usage = parsed.include_usage, first = true](size_t, httplib::DataSink& sink) mutable {
        for (const std::string& text : texts) {
          if (!send_event(sink, dump(stream_chunk(endpoint, id, created, options.model_name, text, "", first)))) {
            reply->abandon();  // the client left: the engine stops decoding for it
            return false;
          }
          first = false;
        }
        texts.clear();
        if (done) {
          const std::string reason = reply->failed() ? "error" : reply->output().finish_reason;
          send_event(sink, dump(stream_chunk(endpoint, id, created, options.model_name, "", reason, first)));
          if (include_usage && !reply->failed()) {
            send_event(sink, dump(usage_chunk(endpoint, id, created, options.model_name, reply->output())));
          }
          send_event(sink, "[DONE]");
          sink.done();
          return true;
        }
        done = reply->wait(texts);
        return true;
      });
}

bool HttpServer::Impl::take(size_t room, bool idle, std::vector<ServeRequest>& out) {
  std::unique_lock lock(mutex);
  if (idle) queued.wait(lock, [&] { return stopping || !queue.empty(); });
  if (stopping) return false;
  for (; room > 0 && !queue.empty(); --room) {
    out.push_back(std::move(queue.front().first));
    in_flight.insert(queue.front().second);
    queue.pop_front();
  }
  return true;
}

std::string HttpServer::Impl::metrics() {
  size_t waiting = 0, running = 0;
  {
    std::lock_guard lock(mutex);
    waiting = queue.size();
    running = in_flight.size();
  }
  return str("# HELP jetengine_requests_total Requests answered, by outcome.\n",
             "# TYPE jetengine_requests_total counter\n",
             "jetengine_requests_total{outcome=\"ok\"} ", ok.load(), "\n",
             "jetengine_requests_total{outcome=\"rejected\"} ", rejected.load(), "\n",
             "jetengine_requests_total{outcome=\"aborted\"} ", aborted.load(), "\n",
             "# HELP jetengine_prompt_tokens_total Prompt tokens of the finished requests.\n",
             "# TYPE jetengine_prompt_tokens_total counter\n",
             "jetengine_prompt_tokens_total ", prompt_tokens.load(), "\n",
             "# HELP jetengine_completion_tokens_total Completion tokens of the finished requests.\n",
             "# TYPE jetengine_completion_tokens_total counter\n",
             "jetengine_completion_tokens_total ", completion_tokens.load(), "\n",
             "# HELP jetengine_requests_running Requests the engine is decoding.\n",
             "# TYPE jetengine_requests_running gauge\n",
             "jetengine_requests_running ", running, "\n",
             "# HELP jetengine_requests_waiting Requests queued for the engine.\n",
             "# TYPE jetengine_requests_waiting gauge\n",
             "jetengine_requests_waiting ", waiting, "\n");
}

HttpServer::HttpServer(Engine& engine, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(options))) {
  impl_->routes();
}

HttpServer::~HttpServer() {
  stop();
  impl_->http.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

int HttpServer::listen() {
  Impl& s = *impl_;
  // cpp-httplib listens with a backlog of 5, compiled into the library: a burst of clients
  // connecting at once overflows it, and some get their connection reset (2 of 2,000 requests
  // from 128 clients on the H200, 2026-12-01). So the listening socket is caught as httplib
  // creates it (the last socket made before the accept loop starts) and listen() is called on
  // it again with the system's maximum backlog, which a listening socket accepts.
  int listening_socket = -1;
  s.http.set_socket_options([&listening_socket](socket_t sock) {
    reuse_address(sock);
    listening_socket = sock;
  });
  const int port = s.options.port == 0 ? s.http.bind_to_any_port(s.options.host)
                   : s.http.bind_to_port(s.options.host, s.options.port) ? s.options.port
                                                                          : -1;
  JET_CHECK(port > 0, "cannot listen on ", s.options.host, ":", s.options.port,
            " (in use, or not an address of this machine)");
  JET_CHECK(listening_socket >= 0 && ::listen(listening_socket, SOMAXCONN) == 0,
            "cannot raise the listen backlog of ", s.options.host, ":", port);
  s.http.set_socket_options(reuse_address);
  s.listener = std::thread([&s] { s.http.listen_after_bind(); });
  return port;
}

void HttpServer::serve() {
  Impl& s = *impl_;
  try {
    s.engine.serve([&s](size_t room, bool idle, std::vector<ServeRequest>& out) { return s.take(room, idle, out); },
                   s.options.max_active);
  } catch (const std::exception& e) {
    // The engine failed (e.g. a device error): answer everyone still waiting, then report it.
    std::lock_guard lock(s.mutex);
    for (const std::shared_ptr<Reply>& reply : s.in_flight) reply->fail(str("the engine failed: ", e.what()), 500);
    s.in_flight.clear();
    throw;
  }
  // Every request is answered; let the responses still being written finish (a client that stops
  // reading is cut off by httplib's write timeout, and by this bound at the latest).
  std::unique_lock lock(s.mutex);
  s.responses_closed.wait_for(lock, std::chrono::seconds(30), [&s] { return s.open_responses == 0; });
  lock.unlock();
  s.http.stop();
}

void HttpServer::stop() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
    for (auto& [request, reply] : s.queue) reply->fail("the server is shutting down", 503);
    s.queue.clear();
  }
  s.queued.notify_all();
}

}  // namespace jet::server
