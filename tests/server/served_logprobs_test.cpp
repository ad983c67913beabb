// `logprobs` through HTTP (an in-process HttpServer over the demo model, CPU): one entry per
// completion token with the engine's own log-probability, token texts that add up to the returned
// text, streamed chunks that carry the tokens of their text and add up to the non-streamed
// answer (stop strings and several choices included), and 400s naming the field.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "http_server.h"
#include "jet/engine.h"

namespace {

using nlohmann::json;

std::unique_ptr<jet::Engine> demo_engine() {
  jet::EngineOptions o;
  o.model = std::string(JET_REPO_DIR) + "/models/sdar-tiny-arith";
  o.device = "cpu";
  o.kv_cache_memory_bytes = int64_t{64} << 20;
  return std::make_unique<jet::Engine>(o);
}

const json kQuestion = {{{"role", "user"}, {"content", "What is 4821 + 937?"}}};  // the answer: 5758

// What a choice's logprobs say, in one shape for both endpoints.
struct Seen {
  std::string text;
  std::vector<std::string> tokens;
  std::vector<double> logprobs;
  std::vector<int> offsets;  // /v1/completions' text_offset
  std::string bytes;         // chat's, put together
};

// Appends a choice's (or a chunk's) logprobs to `seen`, checking their shape on the way.
void add_logprobs(const json& logprobs, bool chat, Seen& seen) {
  if (chat) {
    for (const json& t : logprobs.at("content")) {
      seen.tokens.push_back(t.at("token"));
      seen.logprobs.push_back(t.at("logprob"));
      for (const json& b : t.at("bytes")) seen.bytes.push_back(static_cast<char>(b.get<int>()));
      EXPECT_EQ(t.at("top_logprobs"), json::array());
    }
    return;
  }
  EXPECT_TRUE(logprobs.at("top_logprobs").is_null());
  const size_t n = logprobs.at("tokens").size();
  EXPECT_EQ(logprobs.at("token_logprobs").size(), n);
  EXPECT_EQ(logprobs.at("text_offset").size(), n);
  for (size_t i = 0; i < n; ++i) {
    seen.tokens.push_back(logprobs["tokens"][i]);
    seen.logprobs.push_back(logprobs["token_logprobs"][i]);
    seen.offsets.push_back(logprobs["text_offset"][i]);
  }
}

std::string joined(const std::vector<std::string>& pieces) {
  std::string all;
  for (const std::string& p : pieces) all += p;
  return all;
}

// Each is a log-probability, and the texts are the returned text's pieces (offsets included).
void expect_consistent(const Seen& seen, bool chat) {
  for (const double lp : seen.logprobs) EXPECT_TRUE(std::isfinite(lp) && lp <= 0.0) << lp;
  EXPECT_EQ(joined(seen.tokens), seen.text);
  if (chat) {
    EXPECT_EQ(seen.bytes, seen.text);  // the demo model writes ASCII: the bytes are the text's
    return;
  }
  size_t offset = 0;
  for (size_t i = 0; i < seen.tokens.size(); ++i) {
    EXPECT_EQ(seen.offsets[i], static_cast<int>(offset));
    offset += seen.tokens[i].size();
  }
}

class LogprobsServed : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine_ = demo_engine().release();
    reference_ = demo_engine().release();  // for the engine's own outputs while the server runs
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
    delete reference_;
    delete engine_;
  }

  static std::string post_raw(const std::string& path, const json& body, int expected_status = 200) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    auto res = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res) << "no response from " << path;
    if (!res) return "{}";
    EXPECT_EQ(res->status, expected_status) << res->body;
    return res->body;
  }
  // The choices of a whole response.
  static std::vector<Seen> choices(const std::string& path, const json& body) {
    const bool chat = path == "/v1/chat/completions";
    const json r = json::parse(post_raw(path, body));
    std::vector<Seen> seen(r.at("choices").size());
    for (const json& choice : r["choices"]) {
      Seen& s = seen.at(choice.at("index").get<size_t>());
      s.text = chat ? choice["message"]["content"] : choice["text"];
      add_logprobs(choice.at("logprobs"), chat, s);
    }
    return seen;
  }
  // The choices of a stream, put together; every chunk's tokens must make up its text.
  static std::vector<Seen> streamed(const std::string& path, json body, size_t num_choices) {
    const bool chat = path == "/v1/chat/completions";
    body["stream"] = true;
    std::istringstream events(post_raw(path, body));
    std::vector<Seen> seen(num_choices);
    for (std::string line; std::getline(events, line);) {
      if (line.rfind("data: ", 0) != 0 || line == "data: [DONE]") continue;
      const json choice = json::parse(line.substr(6)).at("choices").at(0);
      const std::string text = chat ? choice["delta"].value("content", "") : choice["text"].get<std::string>();
      Seen& s = seen.at(choice.at("index").get<size_t>());
      if (choice.at("logprobs").is_null()) {
        EXPECT_EQ(text, "") << line;
        continue;
      }
      Seen chunk;
      add_logprobs(choice["logprobs"], chat, chunk);
      EXPECT_EQ(joined(chunk.tokens), text) << line;
      s.text += text;
      s.tokens.insert(s.tokens.end(), chunk.tokens.begin(), chunk.tokens.end());
      s.logprobs.insert(s.logprobs.end(), chunk.logprobs.begin(), chunk.logprobs.end());
      s.offsets.insert(s.offsets.end(), chunk.offsets.begin(), chunk.offsets.end());
      s.bytes += chunk.bytes;
    }
    return seen;
  }
  // The engine's own output for `prompt` (greedy: the same whatever the batch).
  static jet::GenerationOutput generate(const jet::Prompt& prompt, const jet::SamplingParams& params) {
    return reference_->generate({prompt}, {params}).at(0);
  }

  static jet::Engine* engine_;
  static jet::Engine* reference_;
  static jet::server::HttpServer* server_;
  static std::thread* engine_thread_;
  static int port_;
};

jet::Engine* LogprobsServed::engine_ = nullptr;
jet::Engine* LogprobsServed::reference_ = nullptr;
jet::server::HttpServer* LogprobsServed::server_ = nullptr;
std::thread* LogprobsServed::engine_thread_ = nullptr;
int LogprobsServed::port_ = 0;

std::vector<double> as_doubles(const std::vector<float>& values) { return {values.begin(), values.end()}; }

}  // namespace

TEST_F(LogprobsServed, OnePerCompletionTokenWithTheEnginesLogprob) {
  jet::SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 12;
  greedy.ignore_eos = true;
  const json body = {
      {"prompt", "12 + 30 ="}, {"temperature", 0}, {"max_tokens", 12}, {"ignore_eos", true}, {"logprobs", 0}};
  const Seen completion = choices("/v1/completions", body).at(0);
  const jet::GenerationOutput expected = generate(engine_->tokenizer().encode("12 + 30 ="), greedy);
  EXPECT_EQ(completion.text, expected.completion_text);
  EXPECT_EQ(completion.logprobs, as_doubles(expected.logprobs));
  EXPECT_EQ(completion.tokens.size(), 12u);
  expect_consistent(completion, false);

  // Chat: the answer, then the EOS token that ended it (a special token: its text is "").
  greedy.max_tokens = 64;
  greedy.ignore_eos = false;
  const Seen chat =
      choices("/v1/chat/completions", {{"messages", kQuestion}, {"temperature", 0}, {"logprobs", true}}).at(0);
  const jet::GenerationOutput answer =
      generate(engine_->apply_chat_template({{"user", "What is 4821 + 937?"}}), greedy);
  EXPECT_EQ(chat.text, "5758");
  EXPECT_EQ(chat.logprobs, as_doubles(answer.logprobs));
  ASSERT_EQ(chat.tokens.size(), answer.completion_ids.size());
  EXPECT_EQ(chat.tokens.back(), "");
  expect_consistent(chat, true);
  // Without logprobs a choice says null.
  const json plain = json::parse(post_raw("/v1/chat/completions", {{"messages", kQuestion}, {"temperature", 0}}));
  EXPECT_TRUE(plain["choices"][0].contains("logprobs") && plain["choices"][0]["logprobs"].is_null());
}

TEST_F(LogprobsServed, StreamedChunksCarryTheTokensOfTheirTextAndAddUpToTheAnswer) {
  for (const std::string path : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    const bool chat = path == "/v1/chat/completions";
    json body = {{"temperature", 1.0}, {"seed", 7}, {"max_tokens", 40}, {"ignore_eos", true}, {"denoising_steps", 2}};
    if (chat) {
      body["messages"] = kQuestion;
      body["logprobs"] = true;
    } else {
      body["prompt"] = "12 + 30 =";
      body["logprobs"] = 0;
    }
    const Seen whole = choices(path, body).at(0);
    expect_consistent(whole, chat);
    EXPECT_EQ(whole.tokens.size(), 40u);
    const Seen stream = streamed(path, body, 1).at(0);
    EXPECT_EQ(stream.text, whole.text);
    EXPECT_EQ(stream.tokens, whole.tokens);
    EXPECT_EQ(stream.logprobs, whole.logprobs);
    EXPECT_EQ(stream.offsets, whole.offsets);

    // A stop string of 3 characters from the middle: the text held back while it might begin
    // there goes out with its tokens, and nothing past the cut is shown.
    std::string stop;
    for (size_t i = whole.text.size() / 2; i + 3 <= whole.text.size() && stop.empty(); ++i) {
      if (whole.text.find(whole.text.substr(i, 3)) > 0) stop = whole.text.substr(i, 3);
    }
    ASSERT_FALSE(stop.empty()) << whole.text;
    body["stop"] = stop;
    const Seen cut = choices(path, body).at(0);
    EXPECT_EQ(cut.text, whole.text.substr(0, whole.text.find(stop)));
    expect_consistent(cut, chat);
    EXPECT_LT(cut.tokens.size(), whole.tokens.size());
    // The tokens before the cut are the uncut answer's.
    EXPECT_EQ(std::vector<double>(whole.logprobs.begin(), whole.logprobs.begin() + cut.logprobs.size()), cut.logprobs);
    const Seen cut_stream = streamed(path, body, 1).at(0);
    EXPECT_EQ(cut_stream.text, cut.text);
    EXPECT_EQ(cut_stream.tokens, cut.tokens);
    EXPECT_EQ(cut_stream.logprobs, cut.logprobs);
    EXPECT_EQ(cut_stream.offsets, cut.offsets);
  }
}

TEST_F(LogprobsServed, EveryChoiceOfSeveralPromptsHasItsOwn) {
  const json body = {{"prompt", {"12 + 30 =", "4 + 5 ="}},
                     {"n", 2},
                     {"temperature", 1.0},
                     {"seed", 3},
                     {"max_tokens", 9},
                     {"ignore_eos", true},
                     {"logprobs", 0}};
  const std::vector<Seen> whole = choices("/v1/completions", body);
  const std::vector<Seen> stream = streamed("/v1/completions", body, 4);
  ASSERT_EQ(whole.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(whole[i].tokens.size(), 9u);
    expect_consistent(whole[i], false);
    EXPECT_EQ(stream[i].text, whole[i].text);
    EXPECT_EQ(stream[i].logprobs, whole[i].logprobs);
    EXPECT_EQ(stream[i].offsets, whole[i].offsets);
  }
  EXPECT_NE(whole[0].logprobs, whole[1].logprobs);  // seeds 3 and 4
}

TEST_F(LogprobsServed, WhatCannotBeGivenIsA400NamingTheField) {
  auto message = [](const std::string& path, const json& body) {
    return json::parse(post_raw(path, body, 400))["error"]["message"].get<std::string>();
  };
  EXPECT_NE(message("/v1/chat/completions", {{"messages", kQuestion}, {"logprobs", true}, {"top_logprobs", 2}})
                .find("key 'top_logprobs' (2)"),
            std::string::npos);
  EXPECT_NE(message("/v1/chat/completions", {{"messages", kQuestion}, {"logprobs", "yes"}})
                .find("key 'logprobs' must be a boolean"),
            std::string::npos);
  EXPECT_NE(message("/v1/completions", {{"prompt", "1 + 1 ="}, {"logprobs", 5}}).find("key 'logprobs' (5)"),
            std::string::npos);
  EXPECT_NE(message("/v1/completions", {{"prompt", "1 + 1 ="}, {"logprobs", "yes"}, {"stream", true}})
                .find("key 'logprobs' must be an integer"),
            std::string::npos);
}
