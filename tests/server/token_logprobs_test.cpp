// OpenAI's logprobs of a choice (apps/server/token_logprobs.h) on the Qwen3 tokenizer: the token
// texts add up to the completion text (special tokens add "", a split character comes with its
// last token, a stop string's cut drops the tokens from it on), the bytes are each token's own,
// and the two JSON shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "jet/engine.h"
#include "token_logprobs.h"

namespace {

using jet::server::TokenLogprob;
using nlohmann::json;

const jet::Tokenizer& qwen3() {
  static const jet::Tokenizer tokenizer =
      jet::Tokenizer::from_dir(std::string(JET_REPO_DIR) + "/models/qwen3-tokenizer");
  return tokenizer;
}

// Qwen3 ids: "Hello", " world", " " + the first two bytes of U+1F30D, its third byte, its fourth.
constexpr int32_t kHello = 9707, kWorld = 1879, kEarth1 = 11162, kEarth2 = 234, kEarth3 = 235, kImEnd = 151645;
const std::string kEarth = "\xF0\x9F\x8C\x8D";

// A finished choice of `ids`, whose completion text is `text` (the engine's: special tokens
// skipped, cut before a stop string).
std::vector<TokenLogprob> of(const std::vector<int32_t>& ids, const std::string& text) {
  jet::GenerationOutput out;
  out.completion_ids = ids;
  for (size_t i = 0; i < ids.size(); ++i) out.logprobs.push_back(-0.25f * static_cast<float>(i + 1));
  out.completion_text = text;
  return jet::server::token_logprobs(out, qwen3());
}

std::vector<std::string> texts(const std::vector<TokenLogprob>& tokens) {
  std::vector<std::string> out;
  for (const TokenLogprob& t : tokens) out.push_back(t.text);
  return out;
}
std::vector<std::string> bytes(const std::vector<TokenLogprob>& tokens) {
  std::vector<std::string> out;
  for (const TokenLogprob& t : tokens) out.push_back(t.bytes);
  return out;
}

}  // namespace

TEST(TokenLogprobs, TextsAddUpToTheCompletionAndBytesAreEachTokens) {
  const std::vector<int32_t> ids = {kHello, kWorld, kEarth1, kEarth2, kEarth3, kImEnd};
  const std::string text = qwen3().decode(ids, /*skip_special_tokens=*/true);
  ASSERT_EQ(text, "Hello world " + kEarth);
  const auto tokens = of(ids, text);
  EXPECT_EQ(texts(tokens), (std::vector<std::string>{"Hello", " world", " ", "", kEarth, ""}));
  EXPECT_EQ(bytes(tokens), (std::vector<std::string>{"Hello", " world", " \xF0\x9F", "\x8C", "\x8D", ""}));
  ASSERT_EQ(tokens.size(), ids.size());
  EXPECT_EQ(tokens[5].logprob, -1.5f);
}

TEST(TokenLogprobs, AStopStringDropsTheTokensFromItOnAndCutsTheOneItBeginsIn) {
  // stop "wor": the engine stops at " world" (the token that completes it), its text is "Hello ".
  auto tokens = of({kHello, kWorld}, "Hello ");
  EXPECT_EQ(texts(tokens), (std::vector<std::string>{"Hello", " "}));
  EXPECT_EQ(bytes(tokens), (std::vector<std::string>{"Hello", " "}));
  // stop "Hello" at the start: no token is left.
  EXPECT_TRUE(of({kHello}, "").empty());
  // stop = the emoji: the token that begins it keeps its space, the others go.
  tokens = of({kHello, kWorld, kEarth1, kEarth2, kEarth3}, "Hello world ");
  EXPECT_EQ(texts(tokens), (std::vector<std::string>{"Hello", " world", " "}));
  EXPECT_EQ(bytes(tokens), (std::vector<std::string>{"Hello", " world", " "}));
  // stop "Hello" after the emoji: the split character's tokens stay whole.
  tokens = of({kEarth1, kEarth2, kEarth3, kHello}, " " + kEarth);
  EXPECT_EQ(texts(tokens), (std::vector<std::string>{" ", "", kEarth}));
  EXPECT_EQ(bytes(tokens), (std::vector<std::string>{" \xF0\x9F", "\x8C", "\x8D"}));
}

TEST(TokenLogprobs, AnUnfinishedCharacterAtTheEndJoinsTheLastToken) {
  const std::vector<int32_t> ids = {kEarth1, kEarth2};
  const std::string text = qwen3().decode(ids, true);
  ASSERT_EQ(text, " \xEF\xBF\xBD");
  const auto tokens = of(ids, text);
  EXPECT_EQ(texts(tokens), (std::vector<std::string>{" ", "\xEF\xBF\xBD"}));
  EXPECT_EQ(bytes(tokens), (std::vector<std::string>{" \xF0\x9F", "\x8C"}));
}

TEST(TokenLogprobs, AsTheyComeTheyAreTheFinishedChoices) {
  // A stream pushes the tokens one by one: before finish() the texts are those decoded so far.
  jet::server::TokenLogprobs list(qwen3());
  for (const int32_t id : {kHello, kEarth1, kEarth2}) list.push(id, -1.0f);
  EXPECT_EQ(texts(list.tokens()), (std::vector<std::string>{"Hello", " ", ""}));
  list.push(kEarth3, -1.0f);
  list.finish("Hello " + kEarth);
  EXPECT_EQ(texts(list.tokens()), (std::vector<std::string>{"Hello", " ", "", kEarth}));
}

TEST(TokenLogprobs, ChatAndCompletionsShapes) {
  const auto tokens = of({kHello, kEarth1, kEarth2, kEarth3}, "Hello " + kEarth);
  const json chat = jet::server::chat_logprobs(tokens);
  ASSERT_EQ(chat["content"].size(), 4u);
  EXPECT_EQ(chat["content"][0], (json{{"token", "Hello"},
                                      {"logprob", -0.25},
                                      {"bytes", {72, 101, 108, 108, 111}},
                                      {"top_logprobs", json::array()}}));
  EXPECT_EQ(chat["content"][1]["bytes"], (json{32, 0xF0, 0x9F}));
  EXPECT_EQ(chat["content"][3]["token"], kEarth);
  // Offsets in characters, from the given one (a stream's chunk starts where the last ended).
  const json legacy = jet::server::completion_logprobs(tokens, 3);
  EXPECT_EQ(legacy["tokens"], (json{"Hello", " ", "", kEarth}));
  EXPECT_EQ(legacy["token_logprobs"], (json{-0.25, -0.5, -0.75, -1.0}));
  EXPECT_TRUE(legacy["top_logprobs"].is_null());
  EXPECT_EQ(legacy["text_offset"], (json{3, 8, 9, 9}));
  EXPECT_EQ(jet::server::count_characters("a" + kEarth + "\xC3\xA9"), 3u);
  // A probability that underflowed: JSON has no -inf.
  std::vector<TokenLogprob> underflow = {{"x", "x", -std::numeric_limits<float>::infinity()}};
  EXPECT_EQ(jet::server::chat_logprobs(underflow)["content"][0]["logprob"], -9999.0);
}
