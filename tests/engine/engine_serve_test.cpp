// Engine::serve, the serving loop: requests that join while others run decode exactly as a batch
// generate of the same prompts does, the streamed text adds up to each completion, and a
// rejected request gets its error while the others finish; the committed tokens reported step by
// step are the output's, none twice, under preemption too.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "jet/engine.h"

namespace {

using jet::test::greedy;

struct Result {
  std::string streamed, error;
  std::vector<int32_t> ids, steps;  // on_tokens' tokens, concatenated
  std::vector<float> logprobs;
  jet::GenerationOutput output;
  int outputs = 0;
};

// A request whose callbacks record into `r`.
jet::ServeRequest request_into(Result& r, jet::Prompt prompt, const jet::SamplingParams& params) {
  jet::ServeRequest q;
  q.prompt = std::move(prompt);
  q.params = params;
  q.on_text = [&r](const std::string& text) { r.streamed += text; };
  q.on_tokens = [&r](const std::vector<jet::CommittedToken>& tokens) {
    EXPECT_FALSE(tokens.empty());
    for (const jet::CommittedToken& t : tokens) {
      r.ids.push_back(t.id);
      r.steps.push_back(t.step);
      r.logprobs.push_back(t.logprob);
    }
  };
  q.on_output = [&r](jet::GenerationOutput&& out) {
    r.output = std::move(out);
    ++r.outputs;
  };
  q.on_error = [&r](const std::string& error) { r.error = error; };
  return q;
}

}  // namespace

TEST(EngineServe, LateRequestsDecodeAsABatchDoes) {
  const std::string dir = jet::test::tiny_model_folder("--arch sdar --seed 7");
  jet::Engine engine(jet::test::cpu_options(dir));
  const std::vector<jet::Prompt> prompts = {std::vector<int32_t>{5, 6, 7, 8, 9, 10}, std::vector<int32_t>{11, 12, 13},
                                            std::vector<int32_t>{20, 21}, std::vector<int32_t>{30, 31, 32, 33, 34}};
  const std::vector<jet::GenerationOutput> batch = engine.generate(prompts, {greedy(12)});

  // One request per call of the source, so each joins while the earlier ones are mid-decode.
  std::vector<Result> results(prompts.size());
  size_t handed = 0, calls = 0, idle_calls = 0;
  engine.serve([&](size_t room, bool idle, std::vector<jet::ServeRequest>& out) {
    ++calls;
    idle_calls += idle;
    if (handed < prompts.size() && room > 0) {
      out.push_back(request_into(results[handed], prompts[handed], greedy(12)));
      ++handed;
    }
    return handed < prompts.size();
  });
  EXPECT_GE(calls, prompts.size());
  EXPECT_EQ(idle_calls, 1u);  // only before the first request: the others joined running work
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_TRUE(results[i].error.empty()) << results[i].error;
    EXPECT_EQ(results[i].outputs, 1);
    EXPECT_EQ(results[i].output.completion_ids, batch[i].completion_ids);
    EXPECT_EQ(results[i].output.completion_ids.size(), 12u);
    EXPECT_EQ(results[i].streamed, results[i].output.completion_text);
  }
}

TEST(EngineServe, ARejectedRequestLeavesTheOthersRunning) {
  const std::string dir = jet::test::tiny_model_folder("--arch sdar --seed 8");
  jet::Engine engine(jet::test::cpu_options(dir));
  Result good, empty, bad_params, after;
  jet::SamplingParams bad = greedy(4);
  bad.max_tokens = 0;
  int round = 0;
  engine.serve(
      [&](size_t, bool, std::vector<jet::ServeRequest>& out) {
        if (round == 0) {
          out.push_back(request_into(good, std::vector<int32_t>{5, 6, 7}, greedy(8)));
          out.push_back(request_into(empty, std::vector<int32_t>{}, greedy(8)));
          out.push_back(request_into(bad_params, std::vector<int32_t>{5, 6}, bad));
        } else if (round == 1) {
          out.push_back(request_into(after, std::vector<int32_t>{9, 10}, greedy(4)));
        }
        return ++round < 2;
      },
      /*max_active=*/2);
  EXPECT_TRUE(good.error.empty()) << good.error;
  EXPECT_EQ(good.outputs, 1);
  EXPECT_EQ(good.output.completion_ids.size(), 8u);
  EXPECT_EQ(after.outputs, 1);
  EXPECT_EQ(after.output.completion_ids.size(), 4u);
  EXPECT_NE(empty.error.find("empty"), std::string::npos) << empty.error;
  EXPECT_EQ(empty.outputs, 0);
  EXPECT_NE(bad_params.error.find("max_tokens"), std::string::npos) << bad_params.error;
  EXPECT_EQ(bad_params.outputs, 0);
  // The engine is usable afterwards.
  EXPECT_EQ(jet::test::greedy_decode(engine, 4).size(), 2u);
}

TEST(EngineServe, ACancelledRequestStopsAndFreesItsPlaceForTheOthers) {
  const std::string dir = jet::test::tiny_model_folder("--arch sdar --seed 9");
  jet::EngineOptions options = jet::test::cpu_options(dir);
  options.max_num_seqs = 1;  // one decodes, the others wait in the scheduler
  jet::Engine engine(options);
  const std::vector<jet::Prompt> prompts = {std::vector<int32_t>{5, 6, 7}, std::vector<int32_t>{11, 12, 13, 14},
                                            std::vector<int32_t>{20, 21}};
  const std::vector<jet::GenerationOutput> batch = engine.generate(prompts, {greedy(16)});
  // All three are in flight from the start. Request 0 is cancelled once it has streamed text
  // (mid-decode), request 2 while it still waits for the one slot: neither decodes to the end,
  // request 1 does.
  std::vector<Result> results(prompts.size());
  std::vector<jet::ServeRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i) requests.push_back(request_into(results[i], prompts[i], greedy(16)));
  requests[0].cancelled = [&] { return !results[0].streamed.empty(); };
  requests[2].cancelled = [&] { return results[1].outputs == 0; };
  bool handed = false;
  engine.serve(
      [&](size_t, bool, std::vector<jet::ServeRequest>& out) {
        if (!handed) out = std::move(requests);
        handed = true;
        return false;
      },
      /*max_active=*/3);
  EXPECT_EQ(results[0].outputs, 1);
  EXPECT_EQ(results[0].output.finish_reason, "abort");
  EXPECT_LT(results[0].output.completion_ids.size(), 16u);
  EXPECT_GT(results[0].output.completion_ids.size(), 0u);
  // What it has is the start of its full decode.
  EXPECT_TRUE(std::equal(results[0].output.completion_ids.begin(), results[0].output.completion_ids.end(),
                         batch[0].completion_ids.begin()));
  EXPECT_EQ(results[1].outputs, 1);
  EXPECT_EQ(results[1].output.completion_ids, batch[1].completion_ids);
  EXPECT_EQ(results[1].output.finish_reason, "length");
  EXPECT_EQ(results[2].outputs, 1);
  EXPECT_EQ(results[2].output.finish_reason, "abort");
  EXPECT_TRUE(results[2].output.completion_ids.empty());
  // Nothing leaked: the engine decodes as before.
  EXPECT_EQ(engine.generate(prompts, {greedy(16)})[2].completion_ids, batch[2].completion_ids);
}

TEST(EngineServe, CommittedTokensAddUpToTheOutputUnderPreemption) {
  const std::string dir = jet::test::tiny_model_folder("--arch sdar --seed 10");
  jet::EngineOptions options = jet::test::cpu_options(dir);
  // 12 pages of 8 tokens hold 3 of these sequences at full length: 8 in flight must preempt.
  options.kvcache_page_size = 8;
  options.num_kvcache_pages = 12;
  options.enable_prefix_caching = false;
  jet::Engine engine(options);
  jet::SamplingParams sampled;  // sampled, seeded: logprobs that differ, a restart that repeats
  sampled.temperature = 1.0;
  sampled.max_tokens = 16;
  sampled.ignore_eos = true;
  sampled.denoising_steps = 2;
  std::vector<Result> results(8);
  bool handed = false;
  testing::internal::CaptureStderr();
  engine.serve([&](size_t, bool, std::vector<jet::ServeRequest>& out) {
    for (size_t i = 0; i < results.size() && !handed; ++i) {
      sampled.seed = i;
      std::vector<int32_t> prompt;
      for (size_t k = 0; k < 9 + i % 4; ++k) prompt.push_back(static_cast<int32_t>(20 + 7 * i + k));
      out.push_back(request_into(results[i], prompt, sampled));
    }
    handed = true;
    return false;
  });
  EXPECT_NE(testing::internal::GetCapturedStderr().find("preemptions"), std::string::npos);
  for (size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const jet::GenerationOutput& out = results[i].output;
    EXPECT_EQ(results[i].outputs, 1);
    EXPECT_EQ(out.completion_ids.size(), 16u);
    EXPECT_EQ(results[i].ids, out.completion_ids);
    EXPECT_EQ(results[i].steps, out.trajectory);
    // A restart recomputes a token in another batch, so its logprob may differ in the last bits.
    ASSERT_EQ(results[i].logprobs.size(), out.logprobs.size());
    for (size_t k = 0; k < out.logprobs.size(); ++k) EXPECT_NEAR(results[i].logprobs[k], out.logprobs[k], 1e-4);
  }
}
