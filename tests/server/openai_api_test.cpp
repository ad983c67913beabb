// The OpenAI-compatible bodies (apps/server/openai_api.h): requests become the engine's prompt and
// SamplingParams, what the engine does not do is an error naming the field, and the responses
// have OpenAI's shape.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "jet/engine.h"
#include "openai_api.h"

namespace {

using jet::server::Endpoint;
using jet::server::parse_request;
using nlohmann::json;

jet::Engine& demo_engine() {
  static jet::Engine engine([] {
    jet::EngineOptions o;
    o.model = std::string(JET_REPO_DIR) + "/models/sdar-tiny-arith";
    o.device = "cpu";
    o.kv_cache_memory_bytes = int64_t{64} << 20;
    return o;
  }());
  return engine;
}

std::string error_of(Endpoint endpoint, const std::string& body) {
  try {
    parse_request(endpoint, body, demo_engine(), {});
  } catch (const jet::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(OpenAiApi, StopIsAStringOrAListOfThem) {
  auto stop_of = [](const std::string& body) {
    return parse_request(Endpoint::Completions, body, demo_engine(), {}).params.stop;
  };
  EXPECT_EQ(stop_of(R"({"prompt": "a", "stop": "END"})"), (std::vector<std::string>{"END"}));
  EXPECT_EQ(stop_of(R"({"prompt": "a", "stop": ["\n", "END"]})"), (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(stop_of(R"({"prompt": "a", "stop": ""})").empty());
  EXPECT_TRUE(stop_of(R"({"prompt": "a", "stop": []})").empty());
  EXPECT_TRUE(stop_of(R"({"prompt": "a", "stop": null})").empty());
}

TEST(OpenAiApi, CompletionFieldsBecomeSamplingParams) {
  const auto r = parse_request(Endpoint::Completions,
                               R"({"prompt": "Hi", "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 3,
                                   "seed": 11, "stop_token_ids": [5, 6], "ignore_eos": true, "denoising_steps": 2,
                                   "remasking_strategy": "entropy_bounded", "eb_threshold": 0.5, "stream": true,
                                   "diversity_enforce_barrier": 12, "epsilon_greedy": 0.25,
                                   "editing_threshold": 0.75, "max_post_steps": 5,
                                   "stream_options": {"include_usage": true}, "model": "anything", "user": "ignored", "stop": null, "n": 1})",
                               demo_engine(), {});
  EXPECT_EQ(std::get<std::string>(r.prompts.at(0)), "Hi");
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_EQ(r.params.temperature, 0.0);
  EXPECT_EQ(r.params.top_p, 0.5);
  EXPECT_EQ(r.params.top_k, 3);
  EXPECT_EQ(r.params.seed, 11u);
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_EQ(r.params.denoising_steps, 2);
  EXPECT_EQ(r.params.remasking_strategy, "entropy_bounded");
  EXPECT_EQ(r.params.eb_threshold, 0.5);
  EXPECT_EQ(r.params.diversity_enforce_barrier, 12);
  EXPECT_EQ(r.params.epsilon_greedy, 0.25);
  EXPECT_EQ(r.params.editing_threshold, 0.75);
  EXPECT_EQ(r.params.max_post_steps, 5);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(OpenAiApi, PromptsAsTextOrTokenIdsAndDefaults) {
  jet::SamplingParams defaults;
  defaults.max_tokens = 9;
  const auto ids = parse_request(Endpoint::Completions, R"({"prompt": [1, 2, 3]})", demo_engine(), defaults);
  EXPECT_EQ(std::get<std::vector<int32_t>>(ids.prompts.at(0)), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ids.params.max_tokens, 9);
  EXPECT_FALSE(ids.stream);
  EXPECT_FALSE(ids.include_usage);
  const auto one = parse_request(Endpoint::Completions, R"({"prompt": ["only"]})", demo_engine(), {});
  EXPECT_EQ(std::get<std::string>(one.prompts.at(0)), "only");
  // Several prompts: strings, or lists of token ids.
  const auto texts = parse_request(Endpoint::Completions, R"({"prompt": ["a", "b", "c"], "n": 2})", demo_engine(), {});
  ASSERT_EQ(texts.prompts.size(), 3u);
  EXPECT_EQ(std::get<std::string>(texts.prompts[2]), "c");
  const auto lists = parse_request(Endpoint::Completions, R"({"prompt": [[1, 2], [3]]})", demo_engine(), {});
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(lists.prompts[1]), (std::vector<int32_t>{3}));
}

TEST(OpenAiApi, ChatMessagesGoThroughTheTemplate) {
  const auto r = parse_request(
      Endpoint::ChatCompletions,
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "2 + 2?"}]}],
          "max_completion_tokens": 5})",
      demo_engine(), {});
  EXPECT_EQ(std::get<std::string>(r.prompts.at(0)), demo_engine().apply_chat_template({{"user", "What is 2 + 2?"}}));
  EXPECT_EQ(r.params.max_tokens, 5);
}

TEST(OpenAiApi, ReasoningContentReachesTheTemplateEvenWhenEmpty) {
  // The demo model behind a template that shows what it gets (chat_template.jinja next to the
  // config wins over the config's template); the other files are links to the demo model's.
  const std::filesystem::path demo = std::string(JET_REPO_DIR) + "/models/sdar-tiny-arith";
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("jet_openai_reasoning_" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  struct RemoveOnExit {
    std::filesystem::path path;
    ~RemoveOnExit() { std::filesystem::remove_all(path); }  // the links, not the demo model's files
  } cleanup{folder};
  for (const auto& entry : std::filesystem::directory_iterator(demo)) {
    std::filesystem::create_symlink(entry.path(), folder / entry.path().filename());
  }
  std::ofstream(folder / "chat_template.jinja")
      << "{% for m in messages %}{% if m.reasoning_content is defined %}[{{ m.reasoning_content }}]{% else %}-"
         "{% endif %}{% endfor %}";
  jet::EngineOptions options;
  options.model = folder.string();
  options.device = "cpu";
  options.kv_cache_memory_bytes = int64_t{64} << 20;
  const jet::Engine engine(options);
  // Absent and null are absent; "" is present and empty.
  const auto r = parse_request(Endpoint::ChatCompletions, R"({"messages": [
      {"role": "user", "content": "q"},
      {"role": "assistant", "content": "a", "reasoning_content": null},
      {"role": "assistant", "content": "a", "reasoning_content": ""},
      {"role": "assistant", "content": "a", "reasoning_content": "r"}]})",
                               engine, {});
  EXPECT_EQ(std::get<std::string>(r.prompts.at(0)), "--[][r]");
  try {
    parse_request(Endpoint::ChatCompletions, R"({"messages": [{"role": "assistant", "reasoning_content": 5}]})", engine,
                  {});
    FAIL() << "expected a non-string reasoning_content to be rejected";
  } catch (const jet::Error& e) {
    EXPECT_STREQ(e.what(), "the request body's messages[0]: key 'reasoning_content' must be a string, got integer 5");
  }
}

TEST(OpenAiApi, WhatTheEngineDoesNotDoIsAnErrorNamingTheField) {
  EXPECT_NE(error_of(Endpoint::Completions, "{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, "[1, 2]").find("JSON object"), std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, "{}").find("'prompt' is missing"), std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, R"({"prompt": ["a", 3]})").find("a list of prompts holds strings"),
            std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, R"({"prompt": [[1], [-2]]})").find("token ids"), std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, R"({"prompt": ["a", "b"], "n": 1025})").find("key 'n'"), std::string::npos);
  std::string seventeen = R"({"n": 128, "prompt": ["a")";
  for (int i = 1; i < 17; ++i) seventeen += R"(, "a")";
  EXPECT_NE(
      error_of(Endpoint::Completions, seventeen + "]}").find("17 prompts with n = 128 make more than 2048 choices"),
      std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, R"({"prompt": [1, -2]})").find("token ids"), std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, R"({"prompt": "a", "n": 0})").find("key 'n' must be in [1, 128], got 0"),
            std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, R"({"prompt": "a", "n": 129})").find("key 'n'"), std::string::npos);
  EXPECT_EQ(parse_request(Endpoint::Completions, R"({"prompt": "a", "n": 3})", demo_engine(), {}).n, 3);
  EXPECT_NE(error_of(Endpoint::Completions, R"({"prompt": "a", "stop": ["\n", 3]})").find("key 'stop'"),
            std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, R"({"prompt": "a", "temperature": "hot"})").find("'temperature'"),
            std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, R"({"prompt": "a", "max_tokens": 1.5})").find("'max_tokens'"),
            std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, R"({"prompt": "a", "stream": 1})").find("'stream'"), std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, R"({"prompt": "a", "stream_options": true})").find("'stream_options'"),
            std::string::npos);
  EXPECT_NE(error_of(Endpoint::Completions, R"({"prompt": "a", "stream_options": {"include_usage": 1}})")
                .find("'include_usage'"),
            std::string::npos);
  // Fields the engine does not implement: refused by name unless they ask for nothing.
  for (const char* field : {R"("logit_bias": {"5": -100})", R"("presence_penalty": 0.5)", R"("frequency_penalty": -1)",
                            R"("min_tokens": 4)", R"("echo": true)", R"("best_of": 2)", R"("suffix": "x")"}) {
    const std::string key = std::string(field).substr(1, std::string(field).find('"', 1) - 1);
    EXPECT_NE(
        error_of(Endpoint::Completions, std::string(R"({"prompt": "a", )") + field + "}").find("key '" + key + "' ("),
        std::string::npos)
        << field;
  }
  for (const char* field : {R"("logit_bias": {})", R"("presence_penalty": 0)", R"("frequency_penalty": 0.0)",
                            R"("min_tokens": 0)", R"("echo": false)", R"("best_of": 1)", R"("suffix": "")"}) {
    EXPECT_EQ(error_of(Endpoint::Completions, std::string(R"({"prompt": "a", )") + field + "}"), "") << field;
  }
  EXPECT_NE(error_of(Endpoint::ChatCompletions, R"({"messages": []})").find("'messages'"), std::string::npos);
  EXPECT_NE(error_of(Endpoint::ChatCompletions, R"({"messages": [{"content": "x"}]})").find("'role'"),
            std::string::npos);
}

TEST(OpenAiApi, LogprobsAreChatsBooleanAndTheLegacyZero) {
  auto logprobs_of = [](Endpoint endpoint, const std::string& fields) {
    const std::string body =
        endpoint == Endpoint::Completions ? R"({"prompt": "a")" : R"({"messages": [{"role": "user", "content": "a"}])";
    return parse_request(endpoint, body + (fields.empty() ? "" : ", " + fields) + "}", demo_engine(), {}).logprobs;
  };
  EXPECT_TRUE(logprobs_of(Endpoint::ChatCompletions, R"("logprobs": true)"));
  EXPECT_TRUE(logprobs_of(Endpoint::ChatCompletions, R"("logprobs": true, "top_logprobs": 0)"));
  EXPECT_FALSE(logprobs_of(Endpoint::ChatCompletions, ""));
  EXPECT_FALSE(logprobs_of(Endpoint::ChatCompletions, R"("logprobs": false, "top_logprobs": 0)"));
  EXPECT_FALSE(logprobs_of(Endpoint::ChatCompletions, R"("logprobs": null, "top_logprobs": null)"));
  EXPECT_TRUE(logprobs_of(Endpoint::Completions, R"("logprobs": 0)"));
  EXPECT_FALSE(logprobs_of(Endpoint::Completions, R"("logprobs": null)"));
  EXPECT_FALSE(logprobs_of(Endpoint::Completions, R"("logprobs": false)"));
  EXPECT_FALSE(logprobs_of(Endpoint::Completions, ""));
  const std::string chat = R"({"messages": [{"role": "user", "content": "a"}], )";
  const std::string completion = R"({"prompt": "a", )";
  // Alternatives are not computed: asking for them is refused by name.
  EXPECT_EQ(error_of(Endpoint::ChatCompletions, chat + R"("logprobs": true, "top_logprobs": 5})"),
            "the request body: key 'top_logprobs' (5) asks for the 5 most likely tokens at each position, which this "
            "engine does not compute; only 0 is supported");
  EXPECT_NE(error_of(Endpoint::ChatCompletions, chat + R"("top_logprobs": 2})").find("(and it needs 'logprobs': true)"),
            std::string::npos);
  EXPECT_EQ(error_of(Endpoint::Completions, completion + R"("logprobs": 3})"),
            "the request body: key 'logprobs' (3) asks for the 3 most likely tokens at each position, which this "
            "engine does not compute; 0 gives the chosen tokens' log-probabilities");
  // Wrong types and ranges.
  EXPECT_EQ(error_of(Endpoint::ChatCompletions, chat + R"("logprobs": "yes"})"),
            "the request body: key 'logprobs' must be a boolean, got string \"yes\"");
  EXPECT_NE(error_of(Endpoint::ChatCompletions, chat + R"("logprobs": 1})").find("key 'logprobs' must be a boolean"),
            std::string::npos);
  for (const char* value : {R"("yes")", "true", "0.5"}) {
    EXPECT_NE(error_of(Endpoint::Completions, completion + R"("logprobs": )" + value + "}")
                  .find("key 'logprobs' must be an integer"),
              std::string::npos)
        << value;
  }
  EXPECT_EQ(error_of(Endpoint::Completions, completion + R"("logprobs": -1})"),
            "the request body: key 'logprobs' must be a non-negative integer, got -1");
  EXPECT_NE(error_of(Endpoint::ChatCompletions, chat + R"("logprobs": true, "top_logprobs": "all"})")
                .find("key 'top_logprobs' must be an integer"),
            std::string::npos);
  EXPECT_NE(error_of(Endpoint::ChatCompletions, chat + R"("logprobs": true, "top_logprobs": -1})")
                .find("key 'top_logprobs' must be a non-negative integer, got -1"),
            std::string::npos);
}

TEST(OpenAiApi, ErrorsNameTheRequestBodyAndTheKey) {
  // The messages of core/json_object.h: source, key, expected and actual type, the value.
  EXPECT_EQ(error_of(Endpoint::Completions, R"({"prompt": "a", "temperature": "hot"})"),
            "the request body: key 'temperature' must be a number, got string \"hot\"");
  EXPECT_EQ(error_of(Endpoint::Completions, R"({"prompt": "a", "seed": -1})"),
            "the request body: key 'seed' must be a non-negative integer, got -1");
  EXPECT_EQ(error_of(Endpoint::Completions, R"({"prompt": "a", "max_tokens": 4294967301})"),
            "the request body: key 'max_tokens' must be an integer in [-2^31, 2^31), got integer 4294967301");
  EXPECT_EQ(error_of(Endpoint::ChatCompletions, R"({"messages": [{"role": "user"}, {"content": "x"}]})"),
            "the request body's messages[1]: missing required key 'role'");
  EXPECT_EQ(error_of(Endpoint::ChatCompletions, R"({"messages": [{"role": "user", "content": 5}]})"),
            "the request body's messages[0]: key 'content' must be a string or a list of parts, got integer 5");
}

TEST(OpenAiApi, DeeplyNestedBodiesAreRefusedWhileParsing) {
  // 200,000 levels inside a field: copying such a value would overflow the stack.
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  EXPECT_EQ(error_of(Endpoint::Completions, R"({"prompt": "a", "logit_bias": )" + deep + "}"),
            "the request body: JSON nested deeper than 64 levels");
  std::string objects;
  for (int i = 0; i < 100; ++i) objects += R"({"a": )";
  objects += "1" + std::string(100, '}');
  EXPECT_EQ(error_of(Endpoint::ChatCompletions, objects), "the request body: JSON nested deeper than 64 levels");
  // 64 levels still parse (and then fail on what they hold, not on their depth).
  const std::string ok_depth = std::string(63, '[') + std::string(63, ']');
  EXPECT_EQ(error_of(Endpoint::Completions, R"({"prompt": )" + ok_depth + "}").find("nested"), std::string::npos);
}

TEST(OpenAiApi, ResponsesHaveOpenAisShape) {
  jet::GenerationOutput out;
  out.completion_text = "42";
  out.completion_ids = {7, 8};
  out.prompt_len = 5;
  out.finish_reason = "stop";
  const json c = jet::server::completion_response(Endpoint::Completions, "cmpl-1", 100, "m", {out}, 1);
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["text"], "42");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c["usage"]["total_tokens"], 7);
  EXPECT_TRUE(c["choices"][0].contains("logprobs") && c["choices"][0]["logprobs"].is_null());
  const json chat = jet::server::completion_response(Endpoint::ChatCompletions, "chatcmpl-1", 100, "m", {out}, 1);
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "42");
  // With logprobs, each choice's tokens in the endpoint's shape (token_logprobs_test.cpp has the details).
  out.completion_ids = demo_engine().tokenizer().encode("42");
  out.logprobs.assign(out.completion_ids.size(), -0.5f);
  const json with = jet::server::completion_response(Endpoint::ChatCompletions, "chatcmpl-1", 100, "m", {out}, 1,
                                                     &demo_engine().tokenizer());
  ASSERT_EQ(with["choices"][0]["logprobs"]["content"].size(), out.completion_ids.size());
  EXPECT_EQ(with["choices"][0]["logprobs"]["content"][0]["logprob"], -0.5);
  const json legacy =
      jet::server::completion_response(Endpoint::Completions, "cmpl-1", 100, "m", {out}, 1, &demo_engine().tokenizer());
  EXPECT_EQ(legacy["choices"][0]["logprobs"]["token_logprobs"].size(), out.completion_ids.size());
  EXPECT_EQ(legacy["choices"][0]["logprobs"]["text_offset"][0], 0);
  const json first = jet::server::stream_chunk(Endpoint::ChatCompletions, "x", 1, "m", 0, "4", "", true);
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "4");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const json last = jet::server::stream_chunk(Endpoint::Completions, "x", 1, "m", 2, "", "length", false);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(last["choices"][0]["index"], 2);
  const json usage = jet::server::usage_chunk(Endpoint::Completions, "x", 1, "m", {out}, 1);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
  // Several choices: indexed in order; the prompt counted once, every choice's tokens.
  jet::GenerationOutput other = out;
  other.completion_text = "7";
  other.completion_ids = {9, 10, 11};
  other.finish_reason = "length";
  const json two = jet::server::completion_response(Endpoint::Completions, "cmpl-2", 100, "m", {out, other}, 2);
  ASSERT_EQ(two["choices"].size(), 2u);
  EXPECT_EQ(two["choices"][1]["index"], 1);
  EXPECT_EQ(two["choices"][1]["text"], "7");
  EXPECT_EQ(two["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(two["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(two["usage"]["completion_tokens"], 5);
  EXPECT_EQ(jet::server::usage_chunk(Endpoint::Completions, "x", 1, "m", {out, other}, 2)["usage"]["total_tokens"], 10);
  // Two prompts of one choice each: both prompts counted.
  EXPECT_EQ(jet::server::usage_chunk(Endpoint::Completions, "x", 1, "m", {out, other}, 1)["usage"]["prompt_tokens"],
            10);
  EXPECT_EQ(jet::server::error_body("bad", "invalid_request_error", 400)["error"]["code"], 400);
}
