// commit_block: the prompt's tail skipped in the first block, max_tokens cutting a block, stop
// ids and stop strings ending it (later tokens dropped), max_model_len, and an unfinished block.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/block_commit.h"
#include "jet/tokenizer.h"

using namespace jet;

namespace {

const Tokenizer& tokenizer() {
  static const Tokenizer t = Tokenizer::from_dir(std::string(JET_REPO_DIR) + "/models/sdar-tiny-arith");
  return t;
}

// A sequence of `prompt_len` tokens whose current block starts at block_start.
Sequence sequence(int prompt_len, int block_start, int max_tokens, std::vector<int32_t> stop_ids = {},
                  std::vector<std::string> stop_strings = {}) {
  Sequence seq;
  seq.prompt.assign(prompt_len, 20);
  seq.block_start = block_start;
  seq.status = SeqStatus::Denoising;
  seq.request.max_tokens = max_tokens;
  seq.request.stop_ids = std::move(stop_ids);
  seq.request.stop_strings = stop_strings;
  seq.text = CompletionText(tokenizer(), std::move(stop_strings));
  return seq;
}

// A finished block of `tokens`, with trajectory 1, 2, ... and logprobs / entropies -0.1 * j.
BlockRecord block(std::vector<int32_t> tokens) {
  BlockRecord b;
  const int n = static_cast<int>(tokens.size());
  b.tokens = std::move(tokens);
  b.trajectory.resize(n);
  std::iota(b.trajectory.begin(), b.trajectory.end(), 1);
  for (int j = 0; j < n; ++j) {
    b.logprobs.push_back(-0.1f * j);
    b.entropies.push_back(0.1f * j);
  }
  return b;
}

}  // namespace

TEST(BlockCommit, SkipsThePromptsTailAndContinues) {
  Sequence seq = sequence(6, 4, 64);  // positions 4 and 5 of the block are the prompt's
  const BlockCommit c = commit_block(seq, block({20, 20, 31, 32}), 4, 4096);
  EXPECT_FALSE(c.finished);
  EXPECT_EQ(c.new_tokens, (std::vector<int32_t>{31, 32}));
  EXPECT_EQ(seq.completion, c.new_tokens);
  EXPECT_EQ(seq.trajectory, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(seq.logprobs, (std::vector<float>{-0.2f, -0.3f}));
  EXPECT_EQ(seq.block_start, 8);
  EXPECT_EQ(seq.status, SeqStatus::Denoising);
  EXPECT_TRUE(seq.finish_reason.empty());
}

TEST(BlockCommit, MaxTokensCutsTheBlock) {
  Sequence seq = sequence(4, 4, 3);
  EXPECT_FALSE(commit_block(seq, block({31, 32}), 2, 4096).finished);
  const BlockCommit c = commit_block(seq, block({33, 34}), 2, 4096);
  EXPECT_TRUE(c.finished);
  EXPECT_EQ(c.new_tokens, std::vector<int32_t>{33});
  EXPECT_EQ(seq.completion, (std::vector<int32_t>{31, 32, 33}));
  EXPECT_EQ(seq.finish_reason, "length");
  EXPECT_EQ(seq.status, SeqStatus::Finished);
}

TEST(BlockCommit, AStopIdEndsTheCompletionWithIt) {
  Sequence seq = sequence(4, 4, 64, {40});
  const BlockCommit c = commit_block(seq, block({31, 40, 32, 33}), 4, 4096);
  EXPECT_TRUE(c.finished);
  EXPECT_EQ(seq.completion, (std::vector<int32_t>{31, 40}));
  EXPECT_EQ(seq.finish_reason, "stop");
}

TEST(BlockCommit, AStopPastMaxTokensDoesNotCount) {
  Sequence seq = sequence(4, 4, 1, {40});
  commit_block(seq, block({31, 40, 32, 33}), 4, 4096);
  EXPECT_EQ(seq.completion, std::vector<int32_t>{31});
  EXPECT_EQ(seq.finish_reason, "length");
}

TEST(BlockCommit, AStopStringEndsTheTextBeforeIt) {
  const std::vector<int32_t> ids = tokenizer().encode("12+34=46");
  ASSERT_GE(ids.size(), 4u);
  Sequence seq = sequence(4, 4, 64, {}, {"="});
  std::vector<int32_t> tokens = ids;
  tokens.resize(((ids.size() + 3) / 4) * 4, ids.back());
  const BlockCommit c = commit_block(seq, block(tokens), static_cast<int>(tokens.size()), 4096);
  EXPECT_TRUE(c.finished);
  EXPECT_EQ(seq.finish_reason, "stop");
  EXPECT_EQ(seq.text.text(), "12+34");
  EXPECT_LT(seq.completion.size(), tokens.size());  // the tokens after the stop are dropped
}

TEST(BlockCommit, TheNextBlockMustFitMaxModelLen) {
  Sequence seq = sequence(4, 4, 64);
  EXPECT_FALSE(commit_block(seq, block({31, 32, 33, 34}), 4, 12).finished);  // next block [8, 12) fits
  const BlockCommit c = commit_block(seq, block({35, 36, 37, 38}), 4, 12);   // [12, 16) would not
  EXPECT_TRUE(c.finished);
  EXPECT_EQ(seq.finish_reason, "length");
  EXPECT_EQ(seq.completion.size(), 8u);
}
