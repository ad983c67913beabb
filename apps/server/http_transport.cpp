// HttpTransport (http_transport.h) on Boost.Beast and Asio: the only translation unit that includes
// them (they compile slowly). One io_context run by a few threads; every connection is a Session
// on its own strand, so its steps never run concurrently, and no thread ever waits on a client.
#include "http_transport.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/error.h"
#include "http_server.h"

namespace jet::server {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr int kIoThreads = 2;      // sessions only move bytes: a few threads carry thousands
constexpr int kWorkerThreads = 4;  // offload(): parsing and tokenizing request bodies
constexpr uint32_t kMaxHeaderBytes = 64 << 10;
constexpr uint64_t kMaxBodyBytes = uint64_t{16} << 20;
constexpr size_t kReadBytes = 16 << 10;  // at most one read's worth of bytes from a client
// A request holding at most this much (every header, and most bodies) is not counted against the
// budget for buffered request bytes: so ordinary requests are read whatever the large ones hold,
// and the connection bound already keeps these to max_connections x (this + a read).
constexpr size_t kUnbudgetedBytes = 64 << 10;
// What a 503 for a full budget or a full connection bound tells the client to wait: the requests
// holding them are read and answered, or dropped at the read deadline.
constexpr const char* kRetryAfterSeconds = "1";
// How long a refused connection (503) is read for after its answer, so the answer arrives rather
// than a reset.
constexpr auto kRejectLinger = std::chrono::seconds(1);

std::chrono::milliseconds from_seconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// How a response's body is delimited.
enum class Framing {
  Length,      // Content-Length: a whole response
  Chunked,     // a stream to an HTTP/1.1 client
  UntilClose,  // a stream to an HTTP/1.0 client, which knows no chunks
};

// The bytes of a response's status line and header fields, and of its body when Framing::Length
// (and not a HEAD request's answer).
std::string serialize(const HttpResponse& response, unsigned version, bool keep_alive, Framing framing,
                      bool head_only = false) {
  http::response<http::empty_body> head{static_cast<http::status>(response.status), version};
  if (!response.content_type.empty()) head.set(http::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) head.insert(name, value);
  const bool no_body = response.status < 200 || response.status == 204 || response.status == 304;
  if (framing == Framing::Chunked) head.chunked(true);
  if (framing == Framing::Length && !no_body) head.content_length(response.body.size());
  head.keep_alive(keep_alive);
  std::ostringstream bytes;
  bytes << head.base();
  if (framing == Framing::Length && !head_only) bytes << response.body;
  return bytes.str();
}

// One piece of a chunked body.
std::string chunk(const std::string& data) {
  std::ostringstream bytes;
  bytes << std::hex << data.size() << "\r\n" << data << "\r\n";
  return bytes.str();
}

// The target's path: without the query, percent-decoded (/v1/models/org%2Fname names org/name).
std::string decode_path(std::string_view target) {
  target = target.substr(0, target.find('?'));
  auto hex = [](char c) {
    const int lower = c | 0x20;
    return c >= '0' && c <= '9' ? c - '0' : lower >= 'a' && lower <= 'f' ? lower - 'a' + 10 : -1;
  };
  std::string path;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == '%' && i + 2 < target.size() && hex(target[i + 1]) >= 0 && hex(target[i + 2]) >= 0) {
      path += static_cast<char>(hex(target[i + 1]) * 16 + hex(target[i + 2]));
      i += 2;
    } else {
      path += target[i];
    }
  }
  return path;
}

// Beast refuses a Content-Length that is no byte count without keeping the field, so its value
// is read back from the raw header for the error message.
std::string bad_length_message(const std::string& raw) {
  const std::string head = raw.substr(0, raw.find("\r\n\r\n"));
  std::string lower = head;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string name = "\ncontent-length:";
  const size_t at = lower.find(name);
  if (at == std::string::npos) return "the Content-Length header is not a byte count";
  const size_t end = std::min(lower.find('\r', at + 1), head.size());  // the last field ends the head
  std::string value = head.substr(at + name.size(), end - at - name.size());
  value.erase(0, value.find_first_not_of(" \t"));
  if (!value.empty() && value.find_first_not_of("0123456789 \t") == std::string::npos) {
    return "the request's Content-Length headers disagree, or come with Transfer-Encoding";
  }
  return "the Content-Length header '" + value.substr(0, 40) + "' is not a byte count";
}

class Session;

// What every session of one transport shares: the options, the caller's callbacks, the
// registry of open sessions that the connection bound and shutdown work on, and the budget for
// the bytes of requests being read.
struct Hub {
  const std::chrono::milliseconds read_timeout, write_timeout;
  const size_t max_connections, max_pending_bytes, max_buffered_bytes;
  const HttpTransport::Handler handler;
  const HttpTransport::ErrorResponder error_response;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> buffered_bytes{0};  // taken from max_buffered_bytes by the sessions

  // Takes `bytes` from the budget for buffered request bytes, unless it has less left.
  bool take_buffered(size_t bytes) {
    size_t held = buffered_bytes.load();
    do {
      if (bytes > max_buffered_bytes - held) return false;
    } while (!buffered_bytes.compare_exchange_weak(held, held + bytes));
    return true;
  }
  void give_back_buffered(size_t bytes) { buffered_bytes -= bytes; }

  struct Entry {
    std::weak_ptr<Session> session;
    std::optional<Clock::time_point> reading_since;  // set while it waits for (part of) a request
  };
  std::mutex mutex;  // guards sessions, next_id
  std::condition_variable emptied;
  std::map<uint64_t, Entry> sessions;
  uint64_t next_id = 0;

  // Registers a new session unless the bound is reached and no open session is reading, in which
  // case the caller answers 503. At the bound, the session that has waited longest for its
  // request (idle keep-alive or slow sender) is closed to make room.
  bool admit(const std::shared_ptr<Session>& session, uint64_t& id);
  void set_reading(uint64_t id, bool reading) {
    std::lock_guard lock(mutex);
    const auto it = sessions.find(id);
    if (it != sessions.end()) it->second.reading_since = reading ? std::optional(Clock::now()) : std::nullopt;
  }
  void unregister(uint64_t id) {
    std::lock_guard lock(mutex);
    sessions.erase(id);
    if (sessions.empty()) emptied.notify_all();
  }
  size_t open_count() {
    std::lock_guard lock(mutex);
    return sessions.size();
  }
  std::vector<std::shared_ptr<Session>> open_sessions() {
    std::lock_guard lock(mutex);
    std::vector<std::shared_ptr<Session>> open;
    for (const auto& [id, entry] : sessions) {
      if (auto session = entry.session.lock()) open.push_back(std::move(session));
    }
    return open;
  }
};

class ExchangeImpl;

// One connection: reads a request (header and body under one deadline), hands it to the handler,
// writes its answer, and only then reads the next one. A request holding over kUnbudgetedBytes
// holds them against the hub's budget, each further read taking its bytes before it is made,
// until its answer begins (the routes have parsed the body by then) or the connection closes.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Hub& hub, tcp::socket socket) : hub_(hub), stream_(std::move(socket)) {}

  void start(uint64_t id) {
    id_ = id;
    // Stream events are small writes: without this, Nagle's algorithm would hold each one back
    // until the client acknowledged the last.
    beast::error_code ignored;
    stream_.socket().set_option(tcp::no_delay(true), ignored);
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
  }
  // From any thread: close now (evicted, or the server closes).
  void close_soon() {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->close(); });
  }
  // From any thread: close now if waiting for a request, else once the answer is written.
  void close_when_answered() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->reading_) self->close();
    });
  }
  net::any_io_executor executor() { return stream_.get_executor(); }
  // Before start(): the socket back, for a connection refused at the bound.
  tcp::socket release_socket() { return stream_.release_socket(); }

  // ExchangeImpl's calls, on this session's strand; `from` is ignored unless it is the current
  // request's exchange and the answer is at the right stage.
  void respond(const ExchangeImpl* from, HttpResponse response) {
    if (!current(from) || answer_ != Answer::None) return;
    hold_buffered(0);
    if (hub_.stopping) keep_alive_ = false;  // this answer is the connection's last
    send(serialize(response, version_, keep_alive_, Framing::Length, head_only_));
    finish_answer();
  }
  void stream_begin(const ExchangeImpl* from, const HttpResponse& head) {
    if (!current(from) || answer_ != Answer::None) return;
    hold_buffered(0);
    // An HTTP/1.0 client knows no chunks: its stream ends when the connection closes.
    if (version_ < 11) keep_alive_ = false;
    send(serialize(head, version_, keep_alive_, version_ >= 11 ? Framing::Chunked : Framing::UntilClose));
    answer_ = Answer::Streaming;
  }
  void stream_write(const ExchangeImpl* from, const std::string& data) {
    if (!current(from) || answer_ != Answer::Streaming) return;
    send(version_ >= 11 ? chunk(data) : data);
    // A client that does not read lets its bytes pile up here and in the kernel: past the cap it
    // is dropped (and its request cancelled) rather than held in memory.
    if (unsent_bytes() > hub_.max_pending_bytes) close();
  }
  void stream_end(const ExchangeImpl* from) {
    if (!current(from) || answer_ != Answer::Streaming) return;
    if (version_ >= 11) send("0\r\n\r\n");
    finish_answer();
  }

 private:
  enum class Answer { None, Streaming, Done };
  // What to do once every queued byte is written.
  enum class Then { Nothing, ReadBody, ReadNext, Close };

  bool current(const ExchangeImpl* from) const { return !closed_ && from != nullptr && from == exchange_.get(); }

  void read_request() {
    if (hub_.stopping) return close();
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    header_bytes_ = 0;
    parser_->body_limit(kMaxBodyBytes);
    set_reading(true);
    // One deadline for the whole request, header and body: a client sending a byte now and then
    // cannot stretch it.
    read_deadline_ = Clock::now() + hub_.read_timeout;
    stream_.expires_at(read_deadline_);
    read_header();
  }

  // Beast's async_read_header, written out so that the buffer still holds the header the parser
  // refused (a bad Content-Length is named in the error message, and Beast keeps no such field).
  void read_header() {
    if (buffer_.size() > 0) {
      beast::error_code ec;
      const size_t used = parser_->put(buffer_.data(), ec);
      if (ec && ec != http::error::need_more) return read_failed(ec);
      buffer_.consume(used);
      header_bytes_ += used;
      // Beast 1.74 lets a header that arrives in large reads run past its limit by up to a read
      // (many small fields sent at once), so the bound is also kept here.
      if (header_bytes_ + (parser_->is_header_done() ? 0 : buffer_.size()) > kMaxHeaderBytes) {
        return read_failed(http::error::header_limit);
      }
      if (parser_->is_header_done()) return on_header();
    }
    stream_.async_read_some(buffer_.prepare(kReadBytes), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->buffer_.commit(n);
      if (ec == net::error::eof) {
        ec = self->parser_->got_some() ? http::error::partial_message : http::error::end_of_stream;
      }
      if (ec) return self->read_failed(ec);
      self->read_header();
    });
  }

  void on_header() {
    if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
      send("HTTP/1.1 100 Continue\r\n\r\n");  // curl waits for it before sending a body over 1 KiB
      then_ = Then::ReadBody;
      return flush();
    }
    read_body();
  }

  void read_body() {
    stream_.expires_at(read_deadline_);
    parser_->eager(true);  // each put() takes every body byte buffered
    read_body_some();
  }

  // Beast's async_read, written out so that every read first takes its bytes from the budget.
  void read_body_some() {
    while (!parser_->is_done() && buffer_.size() > 0) {
      beast::error_code ec;
      const size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == http::error::need_more) break;
      if (ec) return read_failed(ec);
      if (used == 0) break;
    }
    if (parser_->is_done()) return on_body();
    // A body of known length is read no further than its end.
    const size_t read_size = std::min<uint64_t>(kReadBytes, parser_->content_length_remaining().value_or(kReadBytes));
    const size_t held = header_bytes_ + parser_->get().body().size() + buffer_.size();
    if (!hold_buffered(held > kUnbudgetedBytes ? held + read_size : held)) return over_budget();
    stream_.async_read_some(buffer_.prepare(read_size), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->buffer_.commit(n);
      if (ec == net::error::eof) ec = http::error::partial_message;
      if (ec) return self->read_failed(ec);
      self->read_body_some();
    });
  }

  void on_body() {
    set_reading(false);
    stream_.expires_never();
    dispatch();
  }

  // Makes the bytes this session holds against the budget `bytes` (none if that is at most
  // kUnbudgetedBytes); false, holding what it held, if the budget has not that much left.
  bool hold_buffered(size_t bytes) {
    if (bytes <= kUnbudgetedBytes) bytes = 0;
    if (bytes > buffered_held_ && !hub_.take_buffered(bytes - buffered_held_)) return false;
    if (bytes < buffered_held_) hub_.give_back_buffered(buffered_held_ - bytes);
    buffered_held_ = bytes;
    return true;
  }

  // The budget for buffered request bytes cannot take this request's next read: refused now,
  // before it holds more, and only this connection is closed.
  void over_budget() {
    HttpResponse busy =
        hub_.error_response(503, str("the server holds as many request bytes as it may (--max-buffered-mb ",
                                     hub_.max_buffered_bytes >> 20, "); try again shortly"));
    busy.headers.emplace_back("Retry-After", kRetryAfterSeconds);
    refuse(busy);
  }

  void read_failed(beast::error_code ec) {
    static const auto& http_errors = http::make_error_code(http::error::end_of_stream).category();
    // A client that left, was too slow, or broke the connection: nobody to answer.
    if (closed_ || ec.category() != http_errors || ec == http::error::end_of_stream ||
        ec == http::error::partial_message) {
      return close();
    }
    // A request the parser refuses: answered, then the connection closes (its framing is lost).
    int status = 400;
    std::string message;
    if (ec == http::error::header_limit) {
      status = 431;
      message = str("the request header exceeds ", kMaxHeaderBytes >> 10, " KiB");
    } else if (ec == http::error::body_limit) {
      status = 413;
      message = str("the request body exceeds ", kMaxBodyBytes >> 20, " MiB");
    } else if (ec == http::error::bad_content_length) {
      message = bad_length_message(beast::buffers_to_string(buffer_.data()));
    } else {
      message = "malformed HTTP request: " + ec.message();
    }
    refuse(hub_.error_response(status, message));
  }

  // Answers a request the transport refuses itself, letting go of what it read of it; then the
  // connection closes.
  void refuse(const HttpResponse& response) {
    parser_.reset();
    hold_buffered(0);
    set_reading(false);
    keep_alive_ = false;
    send(serialize(response, 11, false, Framing::Length));
    then_ = Then::Close;
    flush();
  }

  void dispatch();  // after ExchangeImpl

  void finish_answer() {
    answer_ = Answer::Done;
    exchange_.reset();
    then_ = keep_alive_ ? Then::ReadNext : Then::Close;
    flush();
  }

  void send(std::string bytes) {
    queued_ += bytes;
    flush();
  }

  // Bytes of this connection not yet taken by the client: queued here, being written, and in the
  // kernel's send queue (a write in flight counts twice; the cap is a bound, not an exact count).
  size_t unsent_bytes() {
    int in_kernel = 0;
    if (::ioctl(stream_.socket().native_handle(), SIOCOUTQ, &in_kernel) != 0) in_kernel = 0;
    return queued_.size() + writing_.size() + static_cast<size_t>(std::max(in_kernel, 0));
  }

  void flush() {
    if (closed_ || writing_in_flight_) return;
    if (queued_.empty()) {
      switch (std::exchange(then_, Then::Nothing)) {
        case Then::ReadBody:
          return read_body();
        case Then::ReadNext:
          return read_request();
        case Then::Close:
          return linger();
        case Then::Nothing:
          return;
      }
    }
    writing_ = std::move(queued_);
    queued_.clear();
    writing_in_flight_ = true;
    stream_.expires_after(hub_.write_timeout);
    net::async_write(stream_, net::buffer(writing_), beast::bind_front_handler(&Session::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, size_t) {
    writing_in_flight_ = false;
    writing_.clear();
    if (ec) return close();  // the client left, or took nothing for write_timeout
    stream_.expires_never();
    flush();
  }

  // Closes after a final answer. The client may still be sending (a body refused as too large):
  // reading that to its end first lets the answer arrive instead of a connection reset. It counts
  // as reading, so a newcomer can evict it.
  void linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    set_reading(true);
    stream_.expires_after(hub_.read_timeout);
    drain();
  }
  void drain() {
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(kReadBytes), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }

  void set_reading(bool reading) {
    reading_ = reading;
    hub_.set_reading(id_, reading);
  }

  void close();  // after ExchangeImpl

  Hub& hub_;
  uint64_t id_ = 0;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Clock::time_point read_deadline_;
  std::shared_ptr<ExchangeImpl> exchange_;  // the request being answered; reset once it is
  Answer answer_ = Answer::None;
  unsigned version_ = 11;
  bool keep_alive_ = false, head_only_ = false;
  size_t header_bytes_ = 0;   // of the request being read, taken by the parser
  size_t buffered_held_ = 0;  // taken from the hub's budget for buffered request bytes
  std::string queued_, writing_;
  bool writing_in_flight_ = false;
  Then then_ = Then::Nothing;
  bool reading_ = false, closed_ = false;
};

// A request's Exchange: each call hops onto its session's strand.
class ExchangeImpl final : public Exchange, public std::enable_shared_from_this<ExchangeImpl> {
 public:
  explicit ExchangeImpl(std::shared_ptr<Session> session) : session_(std::move(session)) {}

  void respond(HttpResponse response) override {
    on_strand([response = std::move(response)](Session& s, ExchangeImpl* self) mutable {
      s.respond(self, std::move(response));
    });
  }
  void stream_begin(HttpResponse head) override {
    on_strand([head = std::move(head)](Session& s, ExchangeImpl* self) { s.stream_begin(self, head); });
  }
  void stream_write(std::string data) override {
    on_strand([data = std::move(data)](Session& s, ExchangeImpl* self) { s.stream_write(self, data); });
  }
  void stream_end() override {
    on_strand([](Session& s, ExchangeImpl* self) { s.stream_end(self); });
  }
  bool gone() const override { return gone_; }
  void mark_gone() { gone_ = true; }

 private:
  template <class F>
  void on_strand(F f) {
    net::post(session_->executor(),
              [self = shared_from_this(), f = std::move(f)]() mutable { f(*self->session_, self.get()); });
  }

  const std::shared_ptr<Session> session_;
  std::atomic<bool> gone_{false};
};

void Session::dispatch() {
  http::request<http::string_body> message = parser_->release();
  parser_.reset();
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.path = decode_path(std::string_view(message.target().data(), message.target().size()));
  for (const auto& field : message) {
    request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  request.body = std::move(message.body());
  version_ = message.version();
  keep_alive_ = message.keep_alive();
  head_only_ = message.method() == http::verb::head;
  answer_ = Answer::None;
  exchange_ = std::make_shared<ExchangeImpl>(shared_from_this());
  const std::shared_ptr<ExchangeImpl> exchange = exchange_;
  try {
    hub_.handler(std::move(request), exchange);
  } catch (const std::exception& e) {
    exchange->respond(hub_.error_response(500, e.what()));
  }
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  if (exchange_) exchange_->mark_gone();  // the engine cancels its request at the next step
  exchange_.reset();
  hold_buffered(0);  // the parser goes with the session, once its handlers in flight have run
  hub_.unregister(id_);
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

bool Hub::admit(const std::shared_ptr<Session>& session, uint64_t& id) {
  std::shared_ptr<Session> evicted;
  {
    std::lock_guard lock(mutex);
    if (sessions.size() >= max_connections) {
      auto oldest = sessions.end();
      for (auto it = sessions.begin(); it != sessions.end(); ++it) {
        if (it->second.reading_since &&
            (oldest == sessions.end() || *it->second.reading_since < *oldest->second.reading_since)) {
          oldest = it;
        }
      }
      if (oldest == sessions.end()) return false;
      evicted = oldest->second.session.lock();
      sessions.erase(oldest);
    }
    id = next_id++;
    sessions[id] = Entry{session, std::nullopt};
  }
  if (evicted) evicted->close_soon();
  return true;
}

// A connection over the bound when no session can make room: answered 503, then read for a moment
// (so the answer arrives rather than a reset) and closed.
class Rejected : public std::enable_shared_from_this<Rejected> {
 public:
  Rejected(tcp::socket socket, std::string bytes) : stream_(std::move(socket)), bytes_(std::move(bytes)) {}
  void start() {
    stream_.expires_after(kRejectLinger);
    net::async_write(stream_, net::buffer(bytes_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return;
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      self->drain();
    });
  }

 private:
  void drain() {
    scratch_.consume(scratch_.size());
    stream_.async_read_some(scratch_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (!ec) self->drain();
    });
  }

  beast::tcp_stream stream_;
  std::string bytes_;
  beast::flat_buffer scratch_;
};

}  // namespace

struct HttpTransport::Impl {
  const std::string host;
  const int port;
  Hub hub;
  net::io_context io{kIoThreads};
  tcp::acceptor acceptor{net::make_strand(io)};
  net::steady_timer accept_retry{acceptor.get_executor()};
  net::thread_pool workers{kWorkerThreads};
  std::vector<std::thread> threads;
  std::once_flag closed;

  Impl(const ServerOptions& o, Handler handler, ErrorResponder error_response)
      : host(o.host), port(o.port), hub{from_seconds(o.read_timeout),
                                        from_seconds(o.write_timeout),
                                        static_cast<size_t>(std::max(o.max_connections, 1)),
                                        o.max_pending_bytes,
                                        o.max_buffered_bytes,
                                        std::move(handler),
                                        std::move(error_response)} {}

  void accept() {
    acceptor.async_accept(net::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;
      if (ec) {
        // Out of file descriptors, most likely: try again shortly rather than spin.
        accept_retry.expires_after(std::chrono::milliseconds(50));
        accept_retry.async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec) accept();
        });
        return;
      }
      auto session = std::make_shared<Session>(hub, std::move(socket));
      uint64_t id = 0;
      if (hub.admit(session, id)) {
        session->start(id);
      } else {
        HttpResponse busy =
            hub.error_response(503, str("every connection is busy (--max-connections ", hub.max_connections, ")"));
        busy.headers.emplace_back("Retry-After", kRetryAfterSeconds);
        std::make_shared<Rejected>(session->release_socket(), serialize(busy, 11, false, Framing::Length))->start();
      }
      accept();
    });
  }
  void stop_accepting() {
    beast::error_code ignored;
    acceptor.close(ignored);
    accept_retry.cancel();
  }
};

HttpTransport::HttpTransport(const ServerOptions& options, Handler handler, ErrorResponder error_response)
    : impl_(std::make_unique<Impl>(options, std::move(handler), std::move(error_response))) {}

HttpTransport::~HttpTransport() { close(); }

int HttpTransport::listen() {
  Impl& s = *impl_;
  beast::error_code ec;
  net::ip::address address = net::ip::make_address(s.host, ec);
  if (ec) {  // a name, not an address: its first IPv4 or IPv6 address
    tcp::resolver resolver(s.io);
    const auto found = resolver.resolve(s.host, "", ec);
    JET_CHECK(!ec && !found.empty(), "cannot listen on ", s.host, ":", s.port, " (", ec.message(), ")");
    address = found.begin()->endpoint().address();
  }
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(s.port));
  // Address reuse, for a quick restart on the same port; not SO_REUSEPORT, which would let a second
  // server bind the port silently and take half of its connections. The backlog is the system's
  // maximum: a burst of clients connecting at once must not overflow it.
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  JET_CHECK(!ec, "cannot listen on ", s.host, ":", s.port,
            " (in use, or not an address of this machine: ", ec.message(), ")");
  const int port = s.acceptor.local_endpoint().port();
  net::post(s.acceptor.get_executor(), [&s] { s.accept(); });
  for (int i = 0; i < kIoThreads; ++i) s.threads.emplace_back([&s] { s.io.run(); });
  return port;
}

void HttpTransport::offload(std::function<void()> work) { net::post(impl_->workers, std::move(work)); }

size_t HttpTransport::connections() const { return impl_->hub.open_count(); }

size_t HttpTransport::buffered_bytes() const { return impl_->hub.buffered_bytes.load(); }

void HttpTransport::shutdown(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  s.hub.stopping = true;
  net::post(s.acceptor.get_executor(), [&s] { s.stop_accepting(); });
  for (const auto& session : s.hub.open_sessions()) session->close_when_answered();
  {
    std::unique_lock lock(s.hub.mutex);
    s.hub.emptied.wait_for(lock, grace, [&s] { return s.hub.sessions.empty(); });
  }
  close();
}

void HttpTransport::close() {
  Impl& s = *impl_;
  std::call_once(s.closed, [&s] {
    s.hub.stopping = true;
    // Handlers still running may answer through their exchanges: they finish first.
    s.workers.join();
    net::post(s.acceptor.get_executor(), [&s] { s.stop_accepting(); });
    for (const auto& session : s.hub.open_sessions()) session->close_soon();
    if (!s.threads.empty()) {
      // The closes run on the I/O threads; a moment for them, then those threads stop.
      std::unique_lock lock(s.hub.mutex);
      s.hub.emptied.wait_for(lock, std::chrono::seconds(1), [&s] { return s.hub.sessions.empty(); });
    }
    s.io.stop();
    for (std::thread& t : s.threads) t.join();
  });
}

}  // namespace jet::server
