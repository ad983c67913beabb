// Stop strings (SamplingParams::stop), checked against the same decode without them: the output
// is that decode cut where a stop string first appears in its text, in generate and in serve's
// stream, and a stop string that would need tokens past max_tokens does not stop anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/completion_text.h"
#include "engine_test_util.h"
#include "jet/engine.h"

namespace {

// Seeded sampling (reproducible, whatever else is in the batch): a random tiny model's greedy
// decode repeats one token, and the tests need varied text.
jet::SamplingParams sampled(int max_tokens) {
  jet::SamplingParams p = jet::test::greedy(max_tokens);
  p.temperature = 1.0;
  p.seed = 3;
  return p;
}

const std::vector<jet::Prompt> kPrompts = {std::vector<int32_t>{5, 6, 7, 8, 9, 10}, std::vector<int32_t>{11, 12, 13}};

jet::SamplingParams stopping_at(std::vector<std::string> stop, int max_tokens = 24) {
  jet::SamplingParams p = sampled(max_tokens);
  p.stop = std::move(stop);
  return p;
}

// The fewest leading ids of `full` whose text holds `stop`.
size_t ids_until(const jet::Tokenizer& tokenizer, const std::vector<int32_t>& full, const std::string& stop) {
  for (size_t n = 1; n <= full.size(); ++n) {
    if (tokenizer.decode(std::vector<int32_t>(full.begin(), full.begin() + n), true).find(stop) != std::string::npos) {
      return n;
    }
  }
  return full.size() + 1;
}

class EngineStopStrings : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = jet::test::tiny_model_folder("--arch sdar --seed 7");
    engine_ = std::make_unique<jet::Engine>(jet::test::cpu_options(dir_));
    full_ = engine_->generate(kPrompts, {sampled(24)});
    ASSERT_GE(full_[0].completion_text.size(), 8u);
  }
  std::string dir_;
  std::unique_ptr<jet::Engine> engine_;
  std::vector<jet::GenerationOutput> full_;
};

}  // namespace

TEST_F(EngineStopStrings, TheOutputEndsBeforeTheFirstStopString) {
  const std::string& text = full_[0].completion_text;
  const std::string stop = text.substr(text.size() / 2, 2);
  const size_t cut = text.find(stop);
  const jet::GenerationOutput out = engine_->generate({kPrompts[0]}, {stopping_at({stop})})[0];
  EXPECT_EQ(out.completion_text, text.substr(0, cut));
  EXPECT_EQ(out.finish_reason, "stop");
  const size_t n = ids_until(engine_->tokenizer(), full_[0].completion_ids, stop);
  ASSERT_EQ(out.completion_ids.size(), n);
  EXPECT_TRUE(std::equal(out.completion_ids.begin(), out.completion_ids.end(), full_[0].completion_ids.begin()));
  EXPECT_EQ(out.logprobs.size(), n);
  EXPECT_EQ(out.trajectory.size(), n);
}

TEST_F(EngineStopStrings, TheEarliestOfSeveralWinsAndOthersPromptsAreUntouched) {
  const std::string& text = full_[0].completion_text;
  const std::string late = text.substr(text.size() - 3), early = text.substr(2, 3);
  const size_t cut = std::min(text.find(late), text.find(early));
  const std::vector<jet::GenerationOutput> outs =
      engine_->generate(kPrompts, {stopping_at({late, early, "\x01never\x02"})});
  EXPECT_EQ(outs[0].completion_text, text.substr(0, cut));
  EXPECT_EQ(outs[0].finish_reason, "stop");
  // A prompt whose text holds none of them decodes as without them.
  if (full_[1].completion_text.find(late) == std::string::npos &&
      full_[1].completion_text.find(early) == std::string::npos) {
    EXPECT_EQ(outs[1].completion_ids, full_[1].completion_ids);
    EXPECT_EQ(outs[1].finish_reason, "length");
  }
}

TEST_F(EngineStopStrings, AStopStringPastMaxTokensDoesNotStop) {
  const std::vector<jet::GenerationOutput> short_run = engine_->generate({kPrompts[0]}, {sampled(8)});
  const std::string& text = full_[0].completion_text;
  // A stop string that first appears only in the tokens after the first 8.
  std::string stop;
  for (size_t at = short_run[0].completion_text.size(); at + 2 <= text.size() && stop.empty(); ++at) {
    const std::string candidate = text.substr(at, 2);
    if (ids_until(engine_->tokenizer(), full_[0].completion_ids, candidate) > 8) stop = candidate;
  }
  ASSERT_FALSE(stop.empty());
  const jet::GenerationOutput out = engine_->generate({kPrompts[0]}, {stopping_at({stop}, 8)})[0];
  EXPECT_EQ(out.completion_ids, short_run[0].completion_ids);
  EXPECT_EQ(out.completion_text, short_run[0].completion_text);
  EXPECT_EQ(out.finish_reason, "length");
}

TEST_F(EngineStopStrings, TheStreamNeverSendsTextPastTheStop) {
  const std::string& text = full_[0].completion_text;
  const std::string stop = text.substr(text.size() / 2, 3);
  std::string streamed;
  jet::GenerationOutput output;
  bool handed = false;
  engine_->serve([&](size_t, bool, std::vector<jet::ServeRequest>& out) {
    if (!handed) {
      jet::ServeRequest q;
      q.prompt = kPrompts[0];
      q.params = stopping_at({stop});
      q.on_text = [&](const std::string& piece) { streamed += piece; };
      q.on_output = [&](jet::GenerationOutput&& o) { output = std::move(o); };
      out.push_back(std::move(q));
    }
    handed = true;
    return false;
  });
  EXPECT_EQ(output.completion_text, text.substr(0, text.find(stop)));
  EXPECT_EQ(streamed, output.completion_text);
  EXPECT_EQ(output.finish_reason, "stop");
}

TEST_F(EngineStopStrings, BadStopStringsAreRejectedByName) {
  EXPECT_THROW(
      {
        try {
          engine_->generate({kPrompts[0]}, {stopping_at({""})});
        } catch (const jet::Error& e) {
          EXPECT_NE(std::string(e.what()).find("stop: every stop string must hold 1 to 1024 bytes"), std::string::npos)
              << e.what();
          throw;
        }
      },
      jet::Error);
  EXPECT_THROW(engine_->generate({kPrompts[0]}, {stopping_at(std::vector<std::string>(17, "a"))}), jet::Error);
  EXPECT_THROW(engine_->generate({kPrompts[0]}, {stopping_at({std::string(1025, 'a')})}), jet::Error);
  EXPECT_EQ(engine_->generate({kPrompts[0]}, {sampled(24)})[0].completion_ids, full_[0].completion_ids);
}

// The text a stream may send holds back a tail that could begin a stop string, and only that.
TEST_F(EngineStopStrings, AStreamHoldsBackOnlyWhatCouldBeginAStopString) {
  const jet::Tokenizer& tokenizer = engine_->tokenizer();
  const std::vector<int32_t>& ids = full_[0].completion_ids;
  // A stop string spanning the end of token i's text and the start of token i + 1's.
  for (size_t i = 1; i + 1 < ids.size(); ++i) {
    const std::string before = tokenizer.decode(std::vector<int32_t>(ids.begin(), ids.begin() + i + 1), true);
    const std::string after = tokenizer.decode(std::vector<int32_t>(ids.begin(), ids.begin() + i + 2), true);
    if (before.empty() || after.size() <= before.size()) continue;
    const std::string stop = before.substr(before.size() - 1) + after.substr(before.size(), 1);
    if (after.find(stop) != before.size() - 1) continue;  // it must first appear right there
    jet::CompletionText text(tokenizer, {stop});
    for (size_t j = 0; j <= i; ++j) ASSERT_FALSE(text.push(ids[j]));
    EXPECT_EQ(text.text(), before);
    EXPECT_EQ(text.streamable(), before.substr(0, before.size() - 1));
    EXPECT_TRUE(text.push(ids[i + 1]));
    EXPECT_EQ(text.text(), before.substr(0, before.size() - 1));
    EXPECT_EQ(text.streamable(), text.text());
    return;
  }
  GTEST_FAIL() << "no pair of tokens gave a stop string to test with";
}
