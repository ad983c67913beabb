// `jetengine serve` in-process: an HttpServer on a free port over the demo model (CPU), driven
// through HTTP. Answers match the engine's own decode, streamed deltas add up to the text,
// concurrent requests all finish, bad requests get a JSON 4xx while the server keeps serving,
// and the metrics count what happened. Hostile clients (slow senders, pipelining, oversized or
// malformed requests, more connections than the bound, more request bytes than the budget, streams
// and answers nobody reads) cannot lock out the others. The visualizer's routes and return_tokens
// chunks.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "http_server.h"
#include "core/error.h"
#include "jet/engine.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The data of every server-sent event in `body`, in order ("[DONE]" included).
std::vector<std::string> event_data(const std::string& body) {
  std::vector<std::string> data;
  std::istringstream events(body);
  for (std::string line; std::getline(events, line);) {
    if (line.rfind("data: ", 0) == 0) data.push_back(line.substr(6));
  }
  return data;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// A raw TCP connection to a server, for what httplib cannot send: malformed, slow or pipelined
// requests, and a client that stops reading.
class RawConnection {
 public:
  // receive_buffer > 0: a small socket receive buffer, so that unread bytes back up quickly.
  explicit RawConnection(int port, int receive_buffer = 0) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    if (receive_buffer > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  void send(const std::string& bytes) {
    EXPECT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  // What the server sends until it closes the connection (or `seconds` pass).
  std::string read_all(double seconds = 10) {
    std::string answer;
    const auto deadline = after(seconds);
    while (read_some(answer, deadline) > 0) {
    }
    return answer;
  }
  // One response: up to its header's end and Content-Length bytes of body.
  std::string read_response(double seconds = 10) {
    std::string answer;
    const auto deadline = after(seconds);
    for (;;) {
      const size_t end = answer.find("\r\n\r\n");
      if (end != std::string::npos) {
        const size_t at = answer.find("Content-Length: ");
        const size_t length = at < end ? std::stoul(answer.substr(at + 16)) : 0;
        if (answer.size() >= end + 4 + length) return answer;
      }
      if (read_some(answer, deadline) <= 0) return answer;
    }
  }
  // Whether the server sent something (or closed) within `seconds`; nothing is read.
  bool readable_within(double seconds) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(seconds * 1000)) > 0;
  }
  // Whether the server closed the connection within `seconds` (what it sent first is dropped).
  bool closed_within(double seconds) {
    std::string ignored;
    const auto deadline = after(seconds);
    for (ssize_t n; (n = read_some(ignored, deadline)) != -2;) {
      if (n <= 0) return true;
      ignored.clear();
    }
    return false;
  }

 private:
  // Appends what comes before `deadline`; returns the byte count, 0 at the end of the stream,
  // -1 on an error (a reset), -2 when the deadline passed.
  ssize_t read_some(std::string& into, Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd_, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return -2;
    char buffer[16384];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n > 0) into.append(buffer, n);
    return n < 0 ? -1 : n;
  }

  const int fd_;
};

// The demo model on the CPU.
jet::Engine* demo_engine(int64_t kv_cache_bytes) {
  jet::EngineOptions o;
  o.model = std::string(JET_REPO_DIR) + "/models/sdar-tiny-arith";
  o.device = "cpu";
  o.kv_cache_memory_bytes = kv_cache_bytes;
  return new jet::Engine(o);
}

class Served : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine_ = demo_engine(int64_t{64} << 20);
    jet::server::ServerOptions options;
    options.port = 0;
    options.model_name = "demo";
    server_ = new jet::server::HttpServer(*engine_, options);
    port_ = server_->listen();
    engine_thread_ = new std::thread([] { server_->serve(); });
  }
  static void TearDownTestSuite() {
    server_->stop();
    engine_thread_->join();
    delete engine_thread_;
    delete server_;
    delete engine_;
  }

  static httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c;
  }
  static json post(const std::string& path, const json& body, int expected_status = 200) {
    auto res = client().Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res) << "no response from " << path;
    if (!res) return {};
    EXPECT_EQ(res->status, expected_status) << res->body;
    return json::parse(res->body);
  }
  // Sends `request` as raw bytes on a new connection; returns what the server answers until it
  // closes the connection (or 10 s pass).
  static std::string raw_exchange(const std::string& request) {
    RawConnection connection(port_);
    connection.send(request);
    return connection.read_all();
  }
  static json chat(const std::string& question) {
    return {{"messages", {{{"role", "user"}, {"content", question}}}}, {"temperature", 0}, {"max_tokens", 16}};
  }

  static jet::Engine* engine_;
  static jet::server::HttpServer* server_;
  static std::thread* engine_thread_;
  static int port_;
};

jet::Engine* Served::engine_ = nullptr;
jet::server::HttpServer* Served::server_ = nullptr;
std::thread* Served::engine_thread_ = nullptr;
int Served::port_ = 0;

TEST_F(Served, HealthAndModels) {
  auto health = client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto models = client().Get("/v1/models");
  ASSERT_TRUE(models);
  const json listed = json::parse(models->body)["data"][0];
  EXPECT_EQ(listed["id"], "demo");
  EXPECT_GT(listed["created"].get<int64_t>(), 1700000000);
  auto one = client().Get("/v1/models/demo");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 200);
  EXPECT_EQ(json::parse(one->body), listed);
  auto other = client().Get("/v1/models/gpt-4");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  EXPECT_EQ(json::parse(other->body)["error"]["message"], "the model 'gpt-4' does not exist");
}

TEST_F(Served, ResponseIdsCarryTheServersRandomPrefix) {
  // cmpl-<16 hex digits>-<counter>: a restarted server does not hand out the ids of the last one.
  const std::string a = post("/v1/chat/completions", chat("What is 1 + 2?"))["id"];
  const std::string b = post("/v1/chat/completions", chat("What is 2 + 2?"))["id"];
  ASSERT_EQ(a.rfind("chatcmpl-", 0), 0u) << a;
  ASSERT_GT(a.size(), 9u + 17u);
  EXPECT_EQ(a.substr(9, 16).find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_EQ(a[9 + 16], '-');
  EXPECT_EQ(a.substr(0, 26), b.substr(0, 26));
  EXPECT_NE(a, b);
}

TEST_F(Served, TokenizeAndDetokenizeUseTheModelsTokenizer) {
  const std::vector<int32_t> ids = engine_->tokenizer().encode("What is 4821 + 937?", true);
  const json tokenized = post("/tokenize", {{"prompt", "What is 4821 + 937?"}});
  EXPECT_EQ(tokenized["tokens"].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(tokenized["count"], ids.size());
  // Messages go through the chat template, whose text carries its own special tokens.
  const json messages = {{{"role", "user"}, {"content", "What is 4821 + 937?"}}};
  const std::string rendered = engine_->apply_chat_template({{"user", "What is 4821 + 937?"}});
  EXPECT_EQ(post("/tokenize", {{"messages", messages}})["tokens"].get<std::vector<int32_t>>(),
            engine_->tokenizer().encode(rendered, false));
  EXPECT_EQ(post("/detokenize", {{"tokens", ids}})["prompt"], engine_->tokenizer().decode(ids));
  // Bad input: a JSON 400 naming the problem.
  EXPECT_NE(
      post("/tokenize", {{"prompt", "a"}, {"messages", messages}}, 400)["error"]["message"].get<std::string>().find(
          "one of 'prompt' and 'messages'"),
      std::string::npos);
  EXPECT_NE(post("/detokenize", {{"tokens", {1, 1000000}}}, 400)["error"]["message"].get<std::string>().find(
                "id 1000000 is outside the tokenizer's"),
            std::string::npos);
  EXPECT_NE(post("/detokenize", json::object(), 400)["error"]["message"].get<std::string>().find("'tokens'"),
            std::string::npos);
}

TEST_F(Served, ARequestForAnotherModelIs404) {
  json body = chat("What is 1 + 1?");
  body["model"] = "gpt-4";
  const json r = post("/v1/chat/completions", body, 404);
  EXPECT_EQ(r["error"]["message"], "the model 'gpt-4' does not exist; this server serves 'demo'");
  body["model"] = "demo";
  EXPECT_EQ(post("/v1/chat/completions", body)["model"], "demo");
}

TEST_F(Served, ChatCompletionAnswersTheQuestion) {
  const json r = post("/v1/chat/completions", chat("What is 4821 + 937?"));
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["model"], "demo");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "5758");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 0);
}

TEST_F(Served, StreamedDeltasAddUpToTheCompletion) {
  json body = {{"prompt", "12 + 30 ="}, {"temperature", 0}, {"max_tokens", 12}, {"ignore_eos", true}};
  const json whole = post("/v1/completions", body);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto res = client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  std::string text, finish;
  int chunks = 0;
  bool done = false;
  json usage;
  for (const std::string& data : event_data(res->body)) {
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    const json chunk = json::parse(data);
    if (chunk["choices"].empty()) {  // stream_options.include_usage's last chunk
      usage = chunk["usage"];
      continue;
    }
    text += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
    ++chunks;
  }
  EXPECT_TRUE(done);
  EXPECT_GE(chunks, 2);
  EXPECT_EQ(text, whole["choices"][0]["text"].get<std::string>());
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(whole["usage"]["completion_tokens"], 12);
  EXPECT_EQ(usage, whole["usage"]);
}

// return_tokens (a jetengine extension): every chunk carries the tokens committed with its text,
// which add up to the completion; without it the chunks have no "tokens".
TEST_F(Served, ReturnTokensChunksCarryTheCommittedTokens) {
  json body = {{"prompt", "12 + 30 ="}, {"temperature", 0},     {"max_tokens", 12},
               {"ignore_eos", true},    {"denoising_steps", 2}, {"stream", true}};
  const auto plain = client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->body.find("\"tokens\""), std::string::npos);
  body["return_tokens"] = true;
  auto res = client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  std::string text;
  std::vector<int32_t> ids;
  int last_step = 0, chunks = 0;
  for (const std::string& data : event_data(res->body)) {
    if (data == "[DONE]") continue;
    const json choice = json::parse(data)["choices"][0];
    ASSERT_TRUE(choice["tokens"].is_array()) << data;
    text += choice["text"].get<std::string>();
    if (!choice["text"].get<std::string>().empty()) {
      EXPECT_FALSE(choice["tokens"].empty()) << data;
    }
    if (!choice["tokens"].empty()) ++chunks;
    for (const json& token : choice["tokens"]) {
      const int32_t id = token["id"];
      ids.push_back(id);
      EXPECT_EQ(token["text"], engine_->tokenizer().decode(std::vector<int32_t>{id}));
      // In position order within a block (steps in any order), after the earlier blocks' steps.
      EXPECT_GT(token["step"].get<int>(), last_step);
      EXPECT_LE(token["logprob"].get<double>(), 0.0);
    }
    for (const json& token : choice["tokens"]) last_step = std::max(last_step, token["step"].get<int>());
  }
  EXPECT_EQ(ids.size(), 12u);
  EXPECT_GE(chunks, 3);              // one per committed block of B = 4
  EXPECT_LE(last_step, 2 * chunks);  // S = 2 steps per block
  EXPECT_EQ(engine_->tokenizer().decode(ids, /*skip_special_tokens=*/true), text);
  // Chat streams carry them too.
  const json chat_body = {{"messages", {{{"role", "user"}, {"content", "What is 4821 + 937?"}}}},
                          {"temperature", 0},
                          {"stream", true},
                          {"return_tokens", true}};
  const auto chat = client().Post("/v1/chat/completions", chat_body.dump(), "application/json");
  ASSERT_TRUE(chat);
  EXPECT_NE(chat->body.find("\"tokens\":[{\"id\""), std::string::npos) << chat->body;
  body.erase("stream");
  EXPECT_NE(post("/v1/completions", body, 400)["error"]["message"].get<std::string>().find(
                "'return_tokens' needs 'stream': true"),
            std::string::npos);
}

// GET /viz: the visualizer's page; GET /viz/config: what it starts from.
TEST_F(Served, VizPageAndItsConfig) {
  auto page = client().Get("/viz");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page->body.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(page->body.find("return_tokens: true"), std::string::npos);
  auto config = client().Get("/viz/config");
  ASSERT_TRUE(config);
  EXPECT_EQ(config->status, 200);
  const json c = json::parse(config->body);
  EXPECT_EQ(c["model"], "demo");
  EXPECT_EQ(c["block_length"], engine_->summary().block_length);
  EXPECT_EQ(c["strategies"].get<std::vector<std::string>>(), jet::remasking_strategies());
  EXPECT_EQ(c["api_key_required"], false);
  EXPECT_EQ(c["defaults"]["remasking_strategy"], "low_confidence_static");
  auto wrong_method = client().Post("/viz", "", "text/plain");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
}

TEST_F(Served, NChoicesAreSeededRequestsOfTheirOwn) {
  json body = {{"prompt", "12 + 30 ="}, {"temperature", 1.0}, {"seed", 5}, {"max_tokens", 12}, {"ignore_eos", true}};
  body["n"] = 3;
  const json r = post("/v1/completions", body);
  ASSERT_EQ(r["choices"].size(), 3u);
  body["n"] = 1;
  std::set<std::string> texts;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    body["seed"] = 5 + i;  // choice i of seed s is the request of seed s + i
    EXPECT_EQ(r["choices"][i]["text"], post("/v1/completions", body)["choices"][0]["text"]);
    texts.insert(r["choices"][i]["text"].get<std::string>());
  }
  EXPECT_GT(texts.size(), 1u);
  EXPECT_EQ(r["usage"]["completion_tokens"], 36);
  EXPECT_EQ(r["usage"]["prompt_tokens"], post("/v1/completions", body)["usage"]["prompt_tokens"]);

  // Streamed: each choice's chunks carry its index and add up to its text; one [DONE] at the end.
  body["seed"] = 5;
  body["n"] = 3;
  body["stream"] = true;
  auto res = client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  std::vector<std::string> text(3), finish(3);
  int done = 0;
  for (const std::string& data : event_data(res->body)) {
    if (data == "[DONE]") {
      ++done;
      continue;
    }
    EXPECT_EQ(done, 0) << "a chunk after [DONE]";
    const json choice = json::parse(data)["choices"][0];
    const int index = choice["index"];
    ASSERT_TRUE(index >= 0 && index < 3);
    EXPECT_TRUE(finish[index].empty()) << "a chunk after choice " << index << " finished";
    text[index] += choice["text"].get<std::string>();
    if (!choice["finish_reason"].is_null()) finish[index] = choice["finish_reason"];
  }
  EXPECT_EQ(done, 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(text[i], r["choices"][i]["text"]);
    EXPECT_EQ(finish[i], "length");
  }
}

TEST_F(Served, SeveralPromptsGetTheirChoicesPromptMajor) {
  const std::vector<std::string> prompts = {"12 + 30 =", "4 + 5 =", "7 * 6 ="};
  json body = {{"prompt", prompts}, {"temperature", 1.0}, {"seed", 9},
               {"max_tokens", 8},   {"ignore_eos", true}, {"n", 2}};
  const json r = post("/v1/completions", body);
  ASSERT_EQ(r["choices"].size(), 6u);
  int prompt_tokens = 0;
  body["n"] = 1;
  for (size_t p = 0; p < prompts.size(); ++p) {
    body["prompt"] = prompts[p];
    for (int j = 0; j < 2; ++j) {
      body["seed"] = 9 + j;
      const json single = post("/v1/completions", body);
      EXPECT_EQ(r["choices"][p * 2 + j]["index"], p * 2 + j);
      EXPECT_EQ(r["choices"][p * 2 + j]["text"], single["choices"][0]["text"]) << "prompt " << p << " choice " << j;
      if (j == 0) prompt_tokens += single["usage"]["prompt_tokens"].get<int>();
    }
  }
  EXPECT_EQ(r["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(r["usage"]["completion_tokens"], 48);
  // Token-id prompts too.
  const json ids = post("/v1/completions",
                        {{"prompt", {{5, 6, 7}, {8, 9}}}, {"temperature", 0}, {"max_tokens", 4}, {"ignore_eos", true}});
  ASSERT_EQ(ids["choices"].size(), 2u);
  EXPECT_EQ(ids["usage"]["prompt_tokens"], 5);
}

TEST_F(Served, StopStringsCutTheAnswer) {
  json body = chat("What is 4821 + 937?");  // the demo model answers 5758
  body["stop"] = {"7", "never"};
  json r = post("/v1/chat/completions", body);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "5");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  body["stream"] = true;
  auto res = client().Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  std::string content;
  for (const std::string& data : event_data(res->body)) {
    if (data == "[DONE]") continue;
    const json delta = json::parse(data)["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(content, "5");
}

TEST_F(Served, ConcurrentRequestsAllFinishWithTheirOwnAnswers) {
  const std::vector<std::pair<std::string, std::string>> problems = {{"What is 4821 + 937?", "5758"},
                                                                     {"What is 12 + 30?", "42"},
                                                                     {"What is 100 + 200?", "300"},
                                                                     {"What is 7 + 8?", "15"}};
  std::vector<std::string> answers(problems.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < problems.size(); ++i) {
    clients.emplace_back([&, i] {
      auto res = client().Post("/v1/chat/completions", chat(problems[i].first).dump(), "application/json");
      if (res && res->status == 200) answers[i] = json::parse(res->body)["choices"][0]["message"]["content"];
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < problems.size(); ++i) {
    // Batched answers equal the one-at-a-time ones (greedy decoding is batch-invariant).
    const json alone = post("/v1/chat/completions", chat(problems[i].first));
    EXPECT_EQ(answers[i], alone["choices"][0]["message"]["content"].get<std::string>()) << problems[i].first;
  }
  EXPECT_EQ(answers[0], "5758");
}

TEST_F(Served, ABurstOfConnectionsIsAllAnswered) {
  // More clients connecting at once than cpp-httplib's own listen backlog (5) holds; on the H200
  // such bursts reset 2 of 2,000 connections before the server raised the backlog.
  constexpr int kClients = 200;
  std::atomic<int> answered{0}, ready{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&] {
      ++ready;
      while (ready.load() < kClients) std::this_thread::yield();
      auto res = client().Get("/health");
      if (res && res->status == 200) ++answered;
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(answered.load(), kClients);
}

TEST_F(Served, BadRequestsGetJsonErrorsAndTheServerGoesOn) {
  auto broken = client().Post("/v1/completions", "{broken", "application/json");
  ASSERT_TRUE(broken);
  EXPECT_EQ(broken->status, 400);
  EXPECT_NE(json::parse(broken->body)["error"]["message"].get<std::string>().find("not valid JSON"), std::string::npos);
  // Rejected by the engine (range checks run when it admits the request), streamed or not.
  const json bad = post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 0}}, 400);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("max_tokens"), std::string::npos);
  post("/v1/completions", {{"prompt", "x"}, {"temperature", -1}, {"stream", true}}, 400);
  auto missing = client().Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["code"], 404);
  EXPECT_EQ(post("/v1/chat/completions", chat("What is 12 + 30?"))["choices"][0]["message"]["content"], "42");
}

TEST_F(Served, HttpLevelErrorsAreJsonAndBodiesAreReadWhateverTheirType) {
  auto error_of = [](const httplib::Result& res, int status) {
    EXPECT_TRUE(res);
    if (!res) return std::string();
    EXPECT_EQ(res->status, status) << res->body;
    return json::parse(res->body)["error"]["message"].get<std::string>();
  };
  EXPECT_EQ(error_of(client().Get("/v1/completions"), 405), "method GET is not allowed on /v1/completions");
  EXPECT_NE(error_of(client().Post("/v1/completions", std::string(17 << 20, ' '), "application/json"), 413)
                .find("exceeds 16 MiB"),
            std::string::npos);
  EXPECT_NE(
      error_of(client().Post("/v1/completions", R"({"prompt": "a", "temperature": 1e400})", "application/json"), 400)
          .find("not valid JSON"),
      std::string::npos);
  // Nested 100,000 deep where a prompt belongs: refused while parsing, not a stack overflow.
  const std::string deep = R"({"prompt": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(error_of(client().Post("/v1/completions", deep, "application/json"), 400),
            "the request body: JSON nested deeper than 64 levels");
  // A Content-Length that is no byte count is named as such (httplib took -1 for 2^64 - 1 bytes).
  for (const char* length : {"-1", "1e3", "abc"}) {
    const std::string answer =
        raw_exchange(std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ") + length +
                     "\r\nConnection: close\r\n\r\n{}");
    EXPECT_NE(answer.find("HTTP/1.1 400"), std::string::npos) << length << ": " << answer;
    EXPECT_NE(answer.find(std::string("the Content-Length header '") + length + "' is not a byte count"),
              std::string::npos)
        << answer;
  }
  // As the last field, the value still ends at its line (not at the end of what was sent).
  const std::string last = raw_exchange("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}");
  EXPECT_NE(last.find("the Content-Length header 'abc' is not a byte count"), std::string::npos) << last;
  // What `curl -d` sends: form-encoded, past httplib's 8 KiB limit for forms.
  json body = chat("What is 12 + 30?");
  body["user"] = std::string(10000, 'u');
  auto form = client().Post("/v1/chat/completions", body.dump(), "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  ASSERT_EQ(form->status, 200) << form->body;
  EXPECT_EQ(json::parse(form->body)["choices"][0]["message"]["content"], "42");
}

TEST_F(Served, ASecondServerCannotTakeTheSamePort) {
  jet::server::ServerOptions options;
  options.port = port_;
  jet::server::HttpServer second(*engine_, options);
  EXPECT_THROW(second.listen(), jet::Error);
  EXPECT_EQ(post("/v1/chat/completions", chat("What is 12 + 30?"))["choices"][0]["message"]["content"], "42");
}

TEST_F(Served, AClientThatLeavesAStreamAbortsItsRequest) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = json{{"prompt", "12 + 30 ="}, {"max_tokens", 2048}, {"ignore_eos", true}, {"stream", true}}.dump();
  // Hang up at the first bytes of the event stream.
  req.content_receiver = [](const char*, size_t, uint64_t, uint64_t) { return false; };
  client().send(req);
  // The engine drops the request within a few steps instead of decoding 2,048 tokens.
  std::string m;
  for (int i = 0; i < 300 && m.find("jetengine_requests_total{outcome=\"aborted\"} 1") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto res = client().Get("/metrics");
    ASSERT_TRUE(res);
    m = res->body;
  }
  EXPECT_NE(m.find("jetengine_requests_total{outcome=\"aborted\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("jetengine_requests_running 0"), std::string::npos) << m;
  // And the server goes on.
  EXPECT_EQ(post("/v1/chat/completions", chat("What is 12 + 30?"))["choices"][0]["message"]["content"], "42");
}

TEST_F(Served, MetricsCountRequests) {
  post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"ignore_eos", true}});
  post("/v1/completions", {{"prompt", "x"}, {"max_tokens", -1}}, 400);
  auto res = client().Get("/metrics");
  ASSERT_TRUE(res);
  const std::string& m = res->body;
  EXPECT_NE(m.find("jetengine_requests_total{outcome=\"ok\"} "), std::string::npos) << m;
  EXPECT_NE(m.find("jetengine_requests_total{outcome=\"rejected\"} "), std::string::npos) << m;
  EXPECT_NE(m.find("jetengine_requests_running 0"), std::string::npos) << m;
  EXPECT_NE(m.find("jetengine_requests_waiting 0"), std::string::npos) << m;
  EXPECT_EQ(m.find("jetengine_completion_tokens_total 0\n"), std::string::npos) << m;
}

TEST_F(Served, ManySlowClientsDoNotLockOutTheOthers) {
  // Each sends the start of a request and then nothing, as a slowloris attacker does.
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 300; ++i) {
    slow.push_back(std::make_unique<RawConnection>(port_));
    slow.back()->send("GET /health HTTP/1.1\r\nHo");
  }
  const auto start = Clock::now();
  auto health = client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_LT(seconds_since(start), 1.0);
  EXPECT_EQ(post("/v1/chat/completions", chat("What is 12 + 30?"))["choices"][0]["message"]["content"], "42");
}

TEST_F(Served, PipelinedRequestsAreAllAnsweredInOrder) {
  const std::string tokenize = R"({"prompt": "What is 1 + 1?"})";
  RawConnection connection(port_);
  connection.send(
      "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
      std::to_string(tokenize.size()) + "\r\n\r\n" + tokenize +
      "GET /v1/models/demo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string answers = connection.read_all();
  size_t at = 0;
  for (const char* expected : {R"({"status":"ok"})", R"("tokens":)", R"("owned_by":"jetengine")"}) {
    const size_t status = answers.find("HTTP/1.1 200 OK\r\n", at);
    ASSERT_NE(status, std::string::npos) << answers;
    at = answers.find(expected, status);
    ASSERT_NE(at, std::string::npos) << expected << " in " << answers;
  }
  EXPECT_EQ(answers.find("HTTP/1.1", at), std::string::npos) << answers;
}

TEST_F(Served, AnOversizedHeaderIs431) {
  const std::string answer =
      raw_exchange("GET /health HTTP/1.1\r\nHost: x\r\nX-Padding: " + std::string(100000, 'a') + "\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 431 ", 0), 0u) << answer.substr(0, 200);
  EXPECT_NE(answer.find("the request header exceeds 64 KiB"), std::string::npos) << answer;
  // Many small fields in one send, 66 KiB in all: over the limit too, while 60 KiB of them pass.
  auto fields = [](int count) {
    std::string text;
    for (int i = 0; i < count; ++i) text += "X-F" + std::to_string(i) + ": " + std::string(24, 'b') + "\r\n";
    return text;
  };
  const std::string many = raw_exchange("GET /health HTTP/1.1\r\nHost: x\r\n" + fields(2000) + "\r\n");
  EXPECT_EQ(many.rfind("HTTP/1.1 431 ", 0), 0u) << many.substr(0, 200);
  const std::string fewer =
      raw_exchange("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + fields(1800) + "\r\n");
  EXPECT_EQ(fewer.rfind("HTTP/1.1 200 ", 0), 0u) << fewer.substr(0, 200);
}

TEST_F(Served, ABodyOverTheLimitIs413BeforeItIsSent) {
  RawConnection connection(port_);
  connection.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 17000000\r\n\r\n");
  const std::string answer = connection.read_response();
  EXPECT_EQ(answer.rfind("HTTP/1.1 413 ", 0), 0u) << answer;
  EXPECT_NE(answer.find("the request body exceeds 16 MiB"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
}

TEST_F(Served, MalformedRequestsGet400WithTheReason) {
  for (const char* request : {"GET /health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", "\x01\x02 hello\r\n\r\n",
                              "GET  /health HTTP/1.1\r\n\r\n"}) {
    const std::string answer = raw_exchange(request);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400 ", 0), 0u) << request << ": " << answer;
    const size_t body = answer.find("\r\n\r\n");
    ASSERT_NE(body, std::string::npos) << answer;
    EXPECT_EQ(json::parse(answer.substr(body + 4))["error"]["message"].get<std::string>().rfind(
                  "malformed HTTP request: ", 0),
              0u)
        << answer;
  }
  auto health = client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace

// Servers with tight limits, over one engine of their own (the Served server keeps the defaults).
class Limits : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = demo_engine(int64_t{64} << 20); }
  static void TearDownTestSuite() { delete engine_; }
  static jet::server::ServerOptions options() {
    jet::server::ServerOptions o;
    o.port = 0;
    o.model_name = "demo";
    return o;
  }
  // A server whose engine runs (serve()) until the object goes.
  struct Running {
    jet::server::HttpServer server;
    int port;
    std::thread engine_thread;
    explicit Running(const jet::server::ServerOptions& o)
        : server(*engine_, o), port(server.listen()), engine_thread([this] { server.serve(); }) {}
    ~Running() {
      server.stop();
      engine_thread.join();
    }
  };
  static httplib::Client client(int port) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    return c;
  }
  // A gauge of the server's /metrics.
  static size_t gauge(int port, const std::string& name) {
    auto res = client(port).Get("/metrics");
    EXPECT_TRUE(res);
    if (!res) return 0;
    const size_t at = res->body.find("\n" + name + " ");
    EXPECT_NE(at, std::string::npos) << name << " in " << res->body;
    return at == std::string::npos ? 0 : std::stoul(res->body.substr(at + name.size() + 2));
  }
  // Polls `gauge` until it is `value` (true) or `seconds` pass (false).
  static bool gauge_becomes(int port, const std::string& name, size_t value, double seconds = 10) {
    for (const auto deadline = after(seconds); Clock::now() < deadline;) {
      if (gauge(port, name) == value) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  static jet::Engine* engine_;
};

jet::Engine* Limits::engine_ = nullptr;

TEST_F(Limits, ASlowSenderIsClosedAtTheReadDeadline) {
  jet::server::ServerOptions o = options();
  o.read_timeout = 1;
  jet::server::HttpServer server(*engine_, o);
  const int port = server.listen();
  // A byte every 200 ms never finishes a header; the deadline covers the whole request.
  RawConnection slow(port);
  const auto start = Clock::now();
  const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\n";
  bool closed = false;
  for (size_t i = 0; i < request.size() && !closed; ++i) {
    slow.send(request.substr(i, 1));
    closed = slow.closed_within(0.2);
  }
  EXPECT_TRUE(closed || slow.closed_within(2));
  EXPECT_GT(seconds_since(start), 0.9);
  EXPECT_LT(seconds_since(start), 3.0);
}

TEST_F(Limits, AtTheConnectionBoundTheLongestWaitingReaderMakesRoom) {
  jet::server::ServerOptions o = options();
  o.max_connections = 8;
  jet::server::HttpServer server(*engine_, o);
  const int port = server.listen();
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<RawConnection>(port));
    slow.back()->send("GET /health HTTP/1.1\r\nHo");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // an order of arrival
  }
  auto health = client(port).Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_TRUE(slow.front()->closed_within(2));    // the one waiting longest
  EXPECT_FALSE(slow.back()->closed_within(0.2));  // the newest slow client is still there
  // Past the bound, ordinary requests keep being answered.
  for (int i = 0; i < 20; ++i) {
    auto again = client(port).Get("/health");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 200);
  }
}

TEST_F(Limits, WhenEveryConnectionIsBusyANewcomerGets503) {
  jet::server::ServerOptions o = options();
  o.max_connections = 1;
  jet::server::HttpServer server(*engine_, o);  // never serve()d: its one request stays queued
  const int port = server.listen();
  RawConnection busy(port);
  const std::string body = R"({"prompt": "1 + 1 =", "max_tokens": 4})";
  busy.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
            body);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // read and queued
  RawConnection newcomer(port);
  newcomer.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string answer = newcomer.read_response();
  EXPECT_EQ(answer.rfind("HTTP/1.1 503 ", 0), 0u) << answer;
  EXPECT_NE(answer.find("every connection is busy (--max-connections 1)"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Retry-After: 1\r\n"), std::string::npos) << answer;
}

TEST_F(Limits, AStreamNobodyReadsIsDroppedWhileOthersAreServed) {
  jet::server::ServerOptions o = options();
  o.max_pending_bytes = 4 << 10;  // the write deadline (30 s) does not come into it
  Running running(o);
  // Asks for a long stream through a small receive buffer, and never reads it.
  RawConnection reader_gone(running.port, 4096);
  const std::string body =
      json{{"prompt", "12 + 30 ="}, {"max_tokens", 8192}, {"ignore_eos", true}, {"stream", true}}.dump();
  reader_gone.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                   "\r\n\r\n" + body);
  auto answer =
      client(running.port)
          .Post("/v1/chat/completions",
                json{{"messages", {{{"role", "user"}, {"content", "What is 12 + 30?"}}}}, {"temperature", 0}}.dump(),
                "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(json::parse(answer->body)["choices"][0]["message"]["content"], "42");
  // The stalled stream is cut off and its request aborted well before 8,192 tokens.
  std::string m;
  for (int i = 0; i < 300 && m.find("jetengine_requests_total{outcome=\"aborted\"} 1") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto res = client(running.port).Get("/metrics");
    ASSERT_TRUE(res);
    m = res->body;
  }
  EXPECT_NE(m.find("jetengine_requests_total{outcome=\"aborted\"} 1"), std::string::npos) << m;
  EXPECT_TRUE(reader_gone.closed_within(5));
}

// A client that asks for a large answer and never reads it: the kernel's buffers fill, and at the
// write deadline the server drops the connection (it holds no place after), while the others are
// answered. Nothing but the write deadline can close it: a whole answer is not under the cap on a
// stream's unsent bytes, and the read deadline is not running while the server writes.
TEST_F(Limits, AnAnswerNobodyReadsIsDroppedAtTheWriteDeadline) {
  jet::server::ServerOptions o = options();
  o.write_timeout = 1;
  Running running(o);
  // /tokenize of a 3 MB prompt answers some 8.5 MB of token ids: far more than the client's 4 KiB
  // receive buffer and the server's send buffer (net.ipv4.tcp_wmem's largest, 4 MiB by default)
  // hold. (A machine that lets send buffers grow larger gets a longer prompt.)
  size_t send_buffer_max = 0;
  std::ifstream("/proc/sys/net/ipv4/tcp_wmem") >> send_buffer_max >> send_buffer_max >> send_buffer_max;
  std::string prompt;
  while (prompt.size() < std::max<size_t>(3000000, send_buffer_max)) prompt += "12 + 30 = 42. ";
  const std::string body = json{{"prompt", prompt}}.dump();
  RawConnection stalled(running.port, 4096);
  stalled.send("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
               body);
  ASSERT_TRUE(stalled.readable_within(30));  // the answer has begun; nothing of it is read
  const auto began = Clock::now();
  auto health = client(running.port).Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto chat =
      client(running.port)
          .Post("/v1/chat/completions",
                json{{"messages", {{{"role", "user"}, {"content", "What is 12 + 30?"}}}}, {"temperature", 0}}.dump(),
                "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(json::parse(chat->body)["choices"][0]["message"]["content"], "42");
  // One connection left: the one asking for the metrics.
  EXPECT_TRUE(gauge_becomes(running.port, "jetengine_http_connections", 1));
  EXPECT_GT(seconds_since(began), 0.5);  // its write deadline began at most moments before
  EXPECT_LT(seconds_since(began), 6.0);
  // What it can still read is a cut answer: less than its Content-Length, then the end.
  const std::string got = stalled.read_all();
  ASSERT_EQ(got.rfind("HTTP/1.1 200 ", 0), 0u) << got.substr(0, 200);
  const size_t header_end = got.find("\r\n\r\n");
  const size_t length_at = got.find("Content-Length: ");
  ASSERT_LT(length_at, header_end);
  EXPECT_LT(got.size() - header_end - 4, std::stoul(got.substr(length_at + 16)));
  auto after_it = client(running.port).Get("/health");
  ASSERT_TRUE(after_it);
  EXPECT_EQ(after_it->status, 200);
}

// More request bytes than the budget (max_buffered_bytes): bodies sent slowly on many connections
// hold it as they arrive, a read that would pass it gets a 503 that closes its connection alone,
// small requests (which it does not count) are answered meanwhile, and the bytes come back when
// the requests are answered or their clients leave.
TEST_F(Limits, RequestBytesPastTheBudgetGet503WhileSmallRequestsAreServed) {
  constexpr size_t kKiB = 1024;
  jet::server::ServerOptions o = options();
  o.max_buffered_bytes = 1024 * kKiB;
  Running running(o);
  const int port = running.port;
  // A /tokenize request with a body of `size` bytes (a prompt, and padding the route ignores).
  auto request = [](size_t size) {
    std::string body = R"({"prompt": "What is 1 + 1?", "padding": ")";
    body += std::string(size - body.size() - 2, 'p') + "\"}";
    return std::pair{"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(size) + "\r\n\r\n",
                     body};
  };
  auto expect_over_budget = [](RawConnection& connection) {
    const std::string answer = connection.read_response();
    EXPECT_EQ(answer.rfind("HTTP/1.1 503 ", 0), 0u) << answer.substr(0, 200);
    EXPECT_NE(answer.find("Retry-After: 1\r\n"), std::string::npos) << answer;
    EXPECT_NE(answer.find("Connection: close\r\n"), std::string::npos) << answer;
    const size_t body = answer.find("\r\n\r\n");
    ASSERT_NE(body, std::string::npos) << answer;
    EXPECT_NE(json::parse(answer.substr(body + 4))["error"]["message"].get<std::string>().find("--max-buffered-mb 1)"),
              std::string::npos)
        << answer;
    EXPECT_TRUE(connection.closed_within(2));
  };
  auto expect_tokenized = [](RawConnection& connection) {
    const std::string answer = connection.read_response();
    EXPECT_EQ(answer.rfind("HTTP/1.1 200 ", 0), 0u) << answer.substr(0, 200);
    EXPECT_NE(answer.find(R"("tokens":[)"), std::string::npos) << answer.substr(0, 200);
  };

  // Eight bodies of 240 KiB, sent 16 KiB at a time in turn, all but their last piece: 1.75 MiB.
  constexpr int kSenders = 8;
  constexpr size_t kBody = 240 * kKiB, kPiece = 16 * kKiB;
  const auto [head, body] = request(kBody);
  std::vector<std::unique_ptr<RawConnection>> senders;
  for (int i = 0; i < kSenders; ++i) {
    senders.push_back(std::make_unique<RawConnection>(port));
    senders.back()->send(head);
  }
  for (size_t at = 0; at + kPiece < kBody; at += kPiece) {
    for (auto& sender : senders) sender->send(body.substr(at, kPiece));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Each one still reading holds its header, 224 KiB and its next read (the last 16 KiB): four
  // fit in the 1 MiB, a fifth does not, so at least four are refused (one more when two of the
  // server's threads refuse at the same moment). Waits until the others hold all they were sent.
  const size_t held_each = head.size() + kBody;
  std::vector<bool> refused(kSenders, false);
  int refusals = 0;
  for (const auto deadline = after(10); Clock::now() < deadline;) {
    for (int i = 0; i < kSenders; ++i) {
      if (refused[i] || !senders[i]->readable_within(0.01)) continue;
      expect_over_budget(*senders[i]);
      refused[i] = true;
      ++refusals;
    }
    if (refusals >= kSenders - 4 &&
        gauge(port, "jetengine_http_buffered_request_bytes") == (kSenders - refusals) * held_each) {
      break;
    }
  }
  ASSERT_GE(refusals, kSenders - 4);
  ASSERT_LT(refusals, kSenders);
  ASSERT_EQ(gauge(port, "jetengine_http_buffered_request_bytes"), (kSenders - refusals) * held_each);
  const size_t left = o.max_buffered_bytes - (kSenders - refusals) * held_each;

  // With the budget all but taken (under 64 KiB left with four holding it), small requests are
  // answered: /health, a chat, and a 60 KiB body (not counted: at most 64 KiB with its header).
  auto health = client(port).Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto chat = client(port).Post(
      "/v1/chat/completions",
      json{{"messages", {{{"role", "user"}, {"content", "What is 12 + 30?"}}}}, {"temperature", 0}}.dump(),
      "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(json::parse(chat->body)["choices"][0]["message"]["content"], "42");
  const auto [small_head, small_body] = request(60 * kKiB);
  RawConnection small(port);
  small.send(small_head + small_body);
  expect_tokenized(small);
  // One larger than what is left is refused as it arrives.
  const auto [large_head, large_body] = request(left + 32 * kKiB);
  {
    RawConnection large(port);
    large.send(large_head + large_body);
    expect_over_budget(large);
  }

  // The ones still sending finish and are answered; then the budget is all back, and the larger
  // request fits.
  for (int i = 0; i < kSenders; ++i) {
    if (!refused[i]) senders[i]->send(body.substr(kBody - kPiece));
  }
  for (int i = 0; i < kSenders; ++i) {
    if (!refused[i]) expect_tokenized(*senders[i]);
  }
  EXPECT_TRUE(gauge_becomes(port, "jetengine_http_buffered_request_bytes", 0));
  {
    RawConnection large(port);
    large.send(large_head + large_body);
    expect_tokenized(large);
  }
  // A client that leaves halfway through its body gives its bytes back too.
  auto leaver = std::make_unique<RawConnection>(port);
  leaver->send(head + body.substr(0, 128 * kKiB));  // held with its next read, 16 KiB
  EXPECT_TRUE(gauge_becomes(port, "jetengine_http_buffered_request_bytes", head.size() + 144 * kKiB));
  leaver.reset();
  EXPECT_TRUE(gauge_becomes(port, "jetengine_http_buffered_request_bytes", 0));
}

TEST_F(Limits, StopIsPromptWithSlowClientsConnected) {
  auto running = std::make_unique<Running>(options());
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 100; ++i) {
    slow.push_back(std::make_unique<RawConnection>(running->port));
    slow.back()->send("POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{");
  }
  auto health = client(running->port).Get("/health");
  ASSERT_TRUE(health);
  const auto start = Clock::now();
  running.reset();
  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_TRUE(slow.front()->closed_within(1));
}

// A second server over its own engine, never serve()d: authentication and CORS are answered
// before any request reaches the engine.
TEST(ServerAccess, V1RoutesNeedTheApiKeyAndPreflightsAreAnswered) {
  jet::EngineOptions o;
  o.model = std::string(JET_REPO_DIR) + "/models/sdar-tiny-arith";
  o.device = "cpu";
  o.kv_cache_memory_bytes = int64_t{16} << 20;
  jet::Engine engine(o);
  jet::server::ServerOptions options;
  options.port = 0;
  options.model_name = "demo";
  options.api_key = "s3cret";
  options.allowed_origin = "https://example.org";
  jet::server::HttpServer server(engine, options);
  httplib::Client c("127.0.0.1", server.listen());

  auto anonymous = c.Get("/v1/models");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  EXPECT_EQ(json::parse(anonymous->body)["error"]["message"],
            "this server needs an API key: send 'Authorization: Bearer <key>'");
  auto wrong = c.Get("/v1/models", {{"Authorization", "Bearer s3cre"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto post = c.Post("/v1/completions", R"({"prompt": "a"})", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 401);
  auto right = c.Get("/v1/models", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  EXPECT_EQ(right->get_header_value("Access-Control-Allow-Origin"), "https://example.org");
  auto health = c.Get("/health");  // load balancers probe without keys
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto viz = c.Get("/viz/config");  // the page loads without a key; its requests carry one
  ASSERT_TRUE(viz);
  EXPECT_EQ(viz->status, 200);
  EXPECT_EQ(json::parse(viz->body)["api_key_required"], true);

  auto preflight = c.Options("/v1/chat/completions");
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "https://example.org");
  EXPECT_NE(preflight->get_header_value("Access-Control-Allow-Headers").find("Authorization"), std::string::npos);
}
