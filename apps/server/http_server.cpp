// HttpServer (http_server.h): the routes, the request queue between the HTTP side and the engine
// thread, each generate request's way back to its client (Generation), and the metrics. The
// network side is HttpTransport's; this file only sees HttpRequest and Exchange.
#include "http_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"
#include "http_transport.h"
#include "openai_api.h"
#include "token_logprobs.h"
#include "viz_page.h"

namespace jet::server {

namespace {

using nlohmann::json;

// How long serve() lets the answers still being written finish once the engine is done.
constexpr auto kShutdownGrace = std::chrono::seconds(30);

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Whether `given` equals `expected`, in time that depends on their lengths only.
bool same_key(const std::string& given, const std::string& expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) diff |= given[i] ^ expected[i % std::max<size_t>(expected.size(), 1)];
  return diff == 0 && !expected.empty();
}

// One generate request seen from the engine thread: turns the text and outputs of its choices
// (n per prompt, one engine request each) into the answer on its client's Exchange, a JSON response once every
// choice is done or server-sent events as they come. With return_tokens a step's text waits for
// that step's tokens (Engine::serve sends the text first), so each chunk carries both. With
// logprobs a chunk's text is that of the tokens it carries: text the engine releases goes out
// once its tokens are whole in it (a token whose text is held back, as it may begin a stop string,
// waits for it), and what is left at the end comes with the last tokens. A stream
// starts at the first event, so a request the engine rejects still gets its 4xx status rather
// than an event stream. The engine thread calls it, and stop() for choices still queued, so a
// mutex orders the calls.
class Generation {
 public:
  using ErrorResponder = std::function<HttpResponse(int status, const std::string& message)>;
  // How a request ended: every choice finished, one was aborted, or the engine rejected it.
  enum class Outcome { Ok, Aborted, Rejected };
  // Called once with the outcome, under the Generation's lock and before the answer that ends the
  // request goes out, so whoever the answer reaches sees metrics that include it. (So nothing may
  // call into a Generation while holding a lock that the callback takes.)
  using Settled = std::function<void(Outcome)>;

  Generation(std::shared_ptr<Exchange> exchange, const ParsedRequest& parsed, Endpoint endpoint, std::string id,
             std::string model, HttpHeaders headers, ErrorResponder error_response, const Tokenizer& tokenizer)
      : exchange_(std::move(exchange)),
        endpoint_(endpoint),
        id_(std::move(id)),
        model_(std::move(model)),
        created_(static_cast<int64_t>(std::time(nullptr))),
        stream_(parsed.stream),
        include_usage_(parsed.include_usage),
        return_tokens_(parsed.return_tokens),
        logprobs_(parsed.logprobs),
        headers_(std::move(headers)),
        error_response_(std::move(error_response)),
        tokenizer_(tokenizer),
        n_(parsed.n),
        outputs_(parsed.prompts.size() * static_cast<size_t>(parsed.n)),
        first_(outputs_.size(), true),
        pending_text_(outputs_.size()),
        streamed_(stream_ && logprobs_ ? outputs_.size() : 0, StreamedLogprobs{TokenLogprobs(tokenizer)}) {}

  void on_settled(Settled settled) { settled_ = std::move(settled); }

  // The client went away (or stopped reading its stream), or the request failed: the engine
  // drops its choices still decoding.
  bool gone() const {
    std::lock_guard lock(mutex_);
    return done_ || exchange_->gone();
  }

  void text(int index, const std::string& text) {
    std::lock_guard lock(mutex_);
    if (done_) return;
    if (logprobs_) {
      streamed_[index].released += text.size();
      return;
    }
    if (return_tokens_) {
      pending_text_[index] += text;
      return;
    }
    chunk(index, text, "");
  }

  // The tokens a step committed for choice `index`, after that step's text.
  void tokens(int index, const std::vector<CommittedToken>& committed) {
    std::lock_guard lock(mutex_);
    if (done_) return;
    json list = return_tokens_ ? token_list(committed, tokenizer_) : json(nullptr);
    if (!logprobs_) return chunk(index, std::exchange(pending_text_[index], {}), "", std::move(list));
    StreamedLogprobs& s = streamed_[index];
    for (const CommittedToken& t : committed) s.tokens.push(t.id, t.logprob);
    // The tokens whose text is released, up to the last that adds some (those that add none wait
    // with the next that does).
    const std::vector<TokenLogprob>& all = s.tokens.tokens();
    size_t ready = s.sent, ready_bytes = s.sent_bytes;
    for (size_t i = s.sent, end = s.sent_bytes; i < all.size(); ++i) {
      end += all[i].text.size();
      if (end > s.released) break;
      if (!all[i].text.empty()) ready = i + 1, ready_bytes = end;
    }
    if (ready == s.sent && !return_tokens_) return;
    std::string text;
    for (size_t i = s.sent; i < ready; ++i) text += all[i].text;
    send_logprobs(index, text, std::span(all).subspan(s.sent, ready - s.sent), std::move(list));
    s.sent = ready;
    s.sent_bytes = ready_bytes;
  }

  // Choice `index` is done; the request, once every choice is.
  void output(int index, GenerationOutput&& out) {
    std::lock_guard lock(mutex_);
    all_finished_ = all_finished_ && out.finish_reason != "abort";
    outputs_[index] = std::move(out);
    const bool last = ++finished_ == outputs_.size();
    if (done_) return;
    if (stream_ && logprobs_) {
      // The text not sent yet, with its tokens, then the end.
      StreamedLogprobs& s = streamed_[index];
      const std::string& text = outputs_[index].completion_text;
      s.tokens.finish(text);
      const std::vector<TokenLogprob>& all = s.tokens.tokens();
      const size_t sent = std::min(s.sent, all.size());
      if (sent < all.size() || s.sent_bytes < text.size()) {
        send_logprobs(index, text.substr(std::min(s.sent_bytes, text.size())), std::span(all).subspan(sent),
                      return_tokens_ ? json::array() : json(nullptr));
      }
      chunk(index, "", outputs_[index].finish_reason);
    } else if (stream_) {
      // Text that came without tokens (what a cancelled choice's end releases) goes first.
      if (!pending_text_[index].empty()) chunk(index, std::exchange(pending_text_[index], {}), "");
      chunk(index, "", outputs_[index].finish_reason);
    }
    if (!last) return;
    done_ = true;
    settled_(all_finished_ ? Outcome::Ok : Outcome::Aborted);
    if (!stream_) {
      exchange_->respond(
          {200, "application/json",
           dump(completion_response(endpoint_, id_, created_, model_, outputs_, n_, logprobs_ ? &tokenizer_ : nullptr)),
           headers_});
      return;
    }
    if (include_usage_) event(dump(usage_chunk(endpoint_, id_, created_, model_, outputs_, n_)));
    end();
  }

  // The engine rejected a choice: the request fails (its other choices are dropped).
  void reject(const std::string& message) {
    std::lock_guard lock(mutex_);
    fail_locked(message, 400);
  }

  // The request cannot be served (shut-down, an engine failure). Once a stream has begun, the
  // failure can only end it: a last chunk with finish_reason "error".
  void fail(const std::string& message, int status) {
    std::lock_guard lock(mutex_);
    fail_locked(message, status);
  }

 private:
  void fail_locked(const std::string& message, int status) {
    if (done_) return;
    done_ = true;
    if (status == 400) settled_(Outcome::Rejected);
    if (!begun_) return exchange_->respond(error_response_(status, message));
    chunk(0, "", "error");
    end();
  }
  // One chunk of choice `index`; with return_tokens its "tokens" are `list` (none: empty).
  void chunk(int index, const std::string& text, const std::string& finish_reason, json list = json::array(),
             const json& logprobs = nullptr) {
    begin();
    event(dump(stream_chunk(endpoint_, id_, created_, model_, index, text, finish_reason, first_[index],
                            return_tokens_ ? list : json(nullptr), logprobs)));
    first_[index] = false;
  }
  // A chunk of choice `index` with `text` and the logprobs of `tokens`, the tokens it is made of.
  void send_logprobs(int index, const std::string& text, std::span<const TokenLogprob> tokens, json list) {
    StreamedLogprobs& s = streamed_[index];
    chunk(index, text, "", std::move(list),
          endpoint_ == Endpoint::Completions ? completion_logprobs(tokens, s.sent_characters) : chat_logprobs(tokens));
    s.sent_characters += count_characters(text);
  }
  void begin() {
    if (begun_) return;
    begun_ = true;
    HttpResponse head{200, "text/event-stream", "", headers_};
    head.headers.emplace_back("Cache-Control", "no-cache");
    exchange_->stream_begin(std::move(head));
  }
  void event(const std::string& data) { exchange_->stream_write("data: " + data + "\n\n"); }
  void end() {
    event("[DONE]");
    exchange_->stream_end();
  }

  const std::shared_ptr<Exchange> exchange_;
  const Endpoint endpoint_;
  const std::string id_, model_;
  const int64_t created_;
  const bool stream_, include_usage_, return_tokens_, logprobs_;
  const HttpHeaders headers_;  // CORS
  const ErrorResponder error_response_;
  const Tokenizer& tokenizer_;
  Settled settled_;
  const int n_;  // choices per prompt
  mutable std::mutex mutex_;
  std::vector<GenerationOutput> outputs_;  // by choice
  std::vector<bool> first_;                // by choice: no chunk sent yet
  std::vector<std::string> pending_text_;  // by choice, with return_tokens: text awaiting its tokens
  // A streamed choice's logprobs: its tokens so far, and how far the engine and the chunks are.
  struct StreamedLogprobs {
    TokenLogprobs tokens;
    size_t released = 0;         // bytes of text the engine has released
    size_t sent = 0;             // tokens sent
    size_t sent_bytes = 0;       // bytes of text sent
    size_t sent_characters = 0;  // characters of text sent (text_offset)
  };
  std::vector<StreamedLogprobs> streamed_;  // by choice, with stream and logprobs
  size_t finished_ = 0;                     // choices with their output
  bool begun_ = false, done_ = false, all_finished_ = true;
};

}  // namespace

struct HttpServer::Impl {
  Engine& engine;
  ServerOptions options;

  std::mutex mutex;  // guards queue, in_flight, stopping
  std::condition_variable queued;
  std::deque<std::pair<ServeRequest, std::shared_ptr<Generation>>> queue;
  std::set<std::shared_ptr<Generation>> in_flight;  // taken by the engine, not finished
  bool stopping = false;

  std::atomic<uint64_t> next_id{0}, ok{0}, rejected{0}, aborted{0}, prompt_tokens{0}, completion_tokens{0};

  const int64_t started = static_cast<int64_t>(std::time(nullptr));  // /v1/models' "created"
  // Response ids are this server's random prefix and a counter: unique across restarts too.
  const std::string id_prefix = [] {
    std::random_device entropy;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%08x%08x", entropy(), entropy());
    return std::string(hex);
  }();

  // The POST routes: run on the transport's worker threads (they parse and tokenize bodies).
  using PostHandler = std::function<void(const std::string& body, const std::shared_ptr<Exchange>& exchange)>;
  std::map<std::string, PostHandler> post_routes;
  const std::set<std::string> get_routes = {"/health", "/metrics", "/v1/models", "/viz", "/viz/config"};

  // Last: its threads call the members above, and it stops them before those go.
  HttpTransport transport;

  Impl(Engine& served, ServerOptions o)
      : engine(served),
        options(std::move(o)),
        transport(
            options,
            [this](HttpRequest&& request, std::shared_ptr<Exchange> exchange) {
              route(std::move(request), std::move(exchange));
            },
            // What the transport refuses itself (malformed, oversized, no free connection).
            [this](int status, const std::string& message) {
              ++rejected;
              return error_response(status, message);
            }) {
    for (const auto& [path, endpoint] : {std::pair{"/v1/completions", Endpoint::Completions},
                                         std::pair{"/v1/chat/completions", Endpoint::ChatCompletions}}) {
      post_routes[path] = [this, endpoint = endpoint](const std::string& body, const std::shared_ptr<Exchange>& ex) {
        generate(endpoint, body, ex);
      };
    }
    for (const auto& [path, answer] :
         {std::pair{"/tokenize", &tokenize_response}, std::pair{"/detokenize", &detokenize_response}}) {
      post_routes[path] = [this, answer = answer](const std::string& body, const std::shared_ptr<Exchange>& ex) {
        try {
          ex->respond(json_response(answer(body, engine)));
        } catch (const Error& e) {
          ++rejected;
          ex->respond(error_response(400, e.what()));
        }
      };
    }
  }

  HttpHeaders cors() const {
    if (options.allowed_origin.empty()) return {};
    return {{"Access-Control-Allow-Origin", options.allowed_origin}};
  }
  HttpResponse json_response(const json& body) const { return {200, "application/json", dump(body), cors()}; }
  HttpResponse error_response(int status, const std::string& message) const {
    const char* type = status == 404   ? "not_found_error"
                       : status == 503 ? "unavailable"
                       : status < 500  ? "invalid_request_error"
                                       : "server_error";
    return {status, "application/json", dump(error_body(message, type, status)), cors()};
  }
  // What the visualizer shows and starts its form from.
  json viz_config() const {
    const SamplingParams& d = options.defaults;
    return {{"model", options.model_name},
            {"block_length", engine.summary().block_length},
            {"strategies", remasking_strategies()},
            {"api_key_required", !options.api_key.empty()},
            {"defaults",
             {{"remasking_strategy", d.remasking_strategy},
              {"denoising_steps", d.denoising_steps},
              {"dynamic_threshold", d.dynamic_threshold},
              {"temperature", d.temperature},
              {"max_tokens", d.max_tokens}}}};
  }
  json model_entry() const {
    return {{"id", options.model_name}, {"object", "model"}, {"created", started}, {"owned_by", "jetengine"}};
  }

  void route(HttpRequest&& request, const std::shared_ptr<Exchange>& exchange);
  void generate(Endpoint endpoint, const std::string& body, const std::shared_ptr<Exchange>& exchange);
  bool take(size_t room, bool idle, std::vector<ServeRequest>& out);
  void finished(const std::shared_ptr<Generation>& generation) {
    std::lock_guard lock(mutex);
    in_flight.erase(generation);
  }
  std::string metrics();
};

// On a connection's thread: answers what needs no work at once, hands POST bodies to the workers.
void HttpServer::Impl::route(HttpRequest&& request, const std::shared_ptr<Exchange>& exchange) {
  const std::string& path = request.path;
  // CORS preflights first, then the API key of the /v1/ routes.
  if (request.method == "OPTIONS") {
    HttpResponse preflight{204, "", "", cors()};
    preflight.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    preflight.headers.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type");
    return exchange->respond(std::move(preflight));
  }
  if (!options.api_key.empty() && path.rfind("/v1/", 0) == 0 &&
      !same_key(request.header("Authorization"), "Bearer " + options.api_key)) {
    ++rejected;
    return exchange->respond(error_response(401, "this server needs an API key: send 'Authorization: Bearer <key>'"));
  }
  const std::string models_prefix = "/v1/models/";
  const bool model_path = path.size() > models_prefix.size() && path.rfind(models_prefix, 0) == 0;
  if (request.method == "GET" || request.method == "HEAD") {
    if (path == "/health") return exchange->respond({200, "application/json", R"({"status":"ok"})", cors()});
    if (path == "/metrics") return exchange->respond({200, "text/plain; version=0.0.4", metrics(), cors()});
    // The visualizer stays open without a key: it holds nothing, and its requests carry the key.
    if (path == "/viz") return exchange->respond({200, "text/html; charset=utf-8", std::string(viz_page()), cors()});
    if (path == "/viz/config") return exchange->respond(json_response(viz_config()));
    if (path == "/v1/models") {
      return exchange->respond(json_response({{"object", "list"}, {"data", json::array({model_entry()})}}));
    }
    if (model_path) {
      const std::string id = path.substr(models_prefix.size());
      if (id != options.model_name) {
        return exchange->respond(error_response(404, "the model '" + id.substr(0, 200) + "' does not exist"));
      }
      return exchange->respond(json_response(model_entry()));
    }
  }
  if (request.method == "POST") {
    const auto it = post_routes.find(path);
    if (it != post_routes.end()) {
      return transport.offload([this, handle = it->second, body = std::move(request.body), exchange] {
        try {
          handle(body, exchange);
        } catch (const std::exception& e) {
          exchange->respond(error_response(500, e.what()));
        }
      });
    }
  }
  if (get_routes.count(path) || model_path || post_routes.count(path)) {
    return exchange->respond(error_response(405, "method " + request.method + " is not allowed on " + path));
  }
  exchange->respond(error_response(404, "no route " + request.method + " " + path.substr(0, 200)));
}

void HttpServer::Impl::generate(Endpoint endpoint, const std::string& body, const std::shared_ptr<Exchange>& exchange) {
  ParsedRequest parsed;
  try {
    parsed = parse_request(endpoint, body, engine, options.defaults);
    // Tokenized here, on a worker thread (Tokenizer::encode is thread-safe): on the engine thread
    // a long text prompt would hold up every request decoding there.
    for (Prompt& prompt : parsed.prompts) {
      if (const auto* text = std::get_if<std::string>(&prompt)) prompt = engine.tokenizer().encode(*text);
    }
  } catch (const Error& e) {
    ++rejected;
    return exchange->respond(error_response(400, e.what()));
  }
  if (parsed.model && *parsed.model != options.model_name) {
    ++rejected;
    return exchange->respond(error_response(404, "the model '" + parsed.model->substr(0, 200) +
                                                     "' does not exist; this server serves '" + options.model_name +
                                                     "'"));
  }
  const std::string id =
      (endpoint == Endpoint::Completions ? "cmpl-" : "chatcmpl-") + id_prefix + "-" + std::to_string(next_id++);
  auto generation = std::make_shared<Generation>(
      exchange, parsed, endpoint, id, options.model_name, cors(),
      [this](int status, const std::string& message) { return error_response(status, message); }, engine.tokenizer());
  generation->on_settled([this, weak = std::weak_ptr<Generation>(generation)](Generation::Outcome outcome) {
    ++(outcome == Generation::Outcome::Ok ? ok : outcome == Generation::Outcome::Aborted ? aborted : rejected);
    if (const auto settled = weak.lock()) finished(settled);
  });
  // One engine request per choice; a given seed s gives a prompt's choice j the seed s + j, so
  // the choices differ and each is reproducible.
  std::vector<ServeRequest> choices;
  for (int i = 0; i < static_cast<int>(parsed.prompts.size()) * parsed.n; ++i) {
    const int j = i % parsed.n;
    ServeRequest request;
    request.prompt = parsed.prompts[i / parsed.n];
    request.params = parsed.params;
    if (parsed.params.seed) request.params.seed = *parsed.params.seed + static_cast<uint64_t>(j);
    if (parsed.stream) request.on_text = [generation, i](const std::string& text) { generation->text(i, text); };
    if (parsed.return_tokens || (parsed.stream && parsed.logprobs)) {
      request.on_tokens = [generation, i](const std::vector<CommittedToken>& tokens) { generation->tokens(i, tokens); };
    }
    request.cancelled = [generation] { return generation->gone(); };
    request.on_output = [this, generation, i, j](GenerationOutput&& out) {
      prompt_tokens += j == 0 ? out.prompt_len : 0;
      completion_tokens += out.completion_ids.size();
      generation->output(i, std::move(out));
    };
    request.on_error = [generation](const std::string& error) { generation->reject(error); };
    choices.push_back(std::move(request));
  }
  {
    std::lock_guard lock(mutex);
    if (stopping) return exchange->respond(error_response(503, "the server is shutting down"));
    for (ServeRequest& request : choices) queue.emplace_back(std::move(request), generation);
  }
  queued.notify_one();
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
             "# TYPE jetengine_requests_total counter\n", "jetengine_requests_total{outcome=\"ok\"} ", ok.load(), "\n",
             "jetengine_requests_total{outcome=\"rejected\"} ", rejected.load(), "\n",
             "jetengine_requests_total{outcome=\"aborted\"} ", aborted.load(), "\n",
             "# HELP jetengine_prompt_tokens_total Prompt tokens of the finished requests.\n",
             "# TYPE jetengine_prompt_tokens_total counter\n", "jetengine_prompt_tokens_total ", prompt_tokens.load(),
             "\n", "# HELP jetengine_completion_tokens_total Completion tokens of the finished requests.\n",
             "# TYPE jetengine_completion_tokens_total counter\n", "jetengine_completion_tokens_total ",
             completion_tokens.load(), "\n", "# HELP jetengine_requests_running Requests the engine is decoding.\n",
             "# TYPE jetengine_requests_running gauge\n", "jetengine_requests_running ", running, "\n",
             "# HELP jetengine_requests_waiting Requests queued for the engine.\n",
             "# TYPE jetengine_requests_waiting gauge\n", "jetengine_requests_waiting ", waiting, "\n",
             "# HELP jetengine_http_connections Open HTTP connections.\n", "# TYPE jetengine_http_connections gauge\n",
             "jetengine_http_connections ", transport.connections(), "\n",
             "# HELP jetengine_http_buffered_request_bytes Bytes of requests being read that count against "
             "--max-buffered-mb.\n",
             "# TYPE jetengine_http_buffered_request_bytes gauge\n", "jetengine_http_buffered_request_bytes ",
             transport.buffered_bytes(), "\n");
}

HttpServer::HttpServer(Engine& engine, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(options))) {}

HttpServer::~HttpServer() {
  stop();
  impl_->transport.close();
}

int HttpServer::listen() { return impl_->transport.listen(); }

void HttpServer::serve() {
  Impl& s = *impl_;
  try {
    s.engine.serve([&s](size_t room, bool idle, std::vector<ServeRequest>& out) { return s.take(room, idle, out); },
                   s.options.max_active);
  } catch (const std::exception& e) {
    // The engine failed (e.g. a device error): answer everyone still waiting, then report it.
    std::set<std::shared_ptr<Generation>> in_flight;
    {
      std::lock_guard lock(s.mutex);
      in_flight.swap(s.in_flight);
    }
    for (const std::shared_ptr<Generation>& generation : in_flight) {
      generation->fail(str("the engine failed: ", e.what()), 500);
    }
    throw;
  }
  // Every request is answered; the answers still being written finish (a client that stops
  // reading is dropped by the write deadline or the cap on unsent bytes), then the HTTP side stops.
  s.transport.shutdown(kShutdownGrace);
}

void HttpServer::stop() {
  Impl& s = *impl_;
  std::deque<std::pair<ServeRequest, std::shared_ptr<Generation>>> queued;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
    queued.swap(s.queue);
  }
  s.queued.notify_all();
  // Outside the lock: a Generation's settling takes it.
  for (auto& [request, generation] : queued) generation->fail("the server is shutting down", 503);
}

}  // namespace jet::server
