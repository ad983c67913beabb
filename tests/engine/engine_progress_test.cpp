// The progress callback of Engine::generate: called every step, with the completion tokens
// committed so far (finished prompts' and running ones'), so a bar's tokens/s moves before the
// first prompt finishes.
#include <gtest/gtest.h>

#include <vector>

#include "engine_test_util.h"
#include "jet/engine.h"

TEST(EngineProgress, CountsCommittedTokensOfRunningPrompts) {
  jet::EngineOptions opts;
  opts.model = jet::test::tiny_model_folder("--arch sdar --seed 3");
  opts.device = "cpu";
  opts.num_threads = 1;
  opts.kv_cache_memory_bytes = int64_t{16} << 20;
  jet::Engine engine(opts);
  struct Call {
    size_t done, tokens;
  };
  std::vector<Call> calls;
  auto params = jet::test::greedy(24);
  params.ignore_eos = true;
  const auto outputs = engine.generate({std::vector<int32_t>{5, 6, 7}, std::vector<int32_t>{8, 9}}, {params},
                                       [&](size_t done, size_t, size_t tokens) {
                                         calls.push_back({done, tokens});
                                       });
  ASSERT_FALSE(calls.empty());
  bool before_first_finish = false;
  for (size_t i = 0; i < calls.size(); ++i) {
    before_first_finish |= calls[i].done == 0 && calls[i].tokens > 0;
    if (i > 0) {
      EXPECT_GE(calls[i].tokens, calls[i - 1].tokens);
    }
  }
  EXPECT_TRUE(before_first_finish);
  EXPECT_EQ(calls.back().done, 2u);
  EXPECT_EQ(calls.back().tokens, outputs[0].completion_ids.size() + outputs[1].completion_ids.size());
}
