// The engine in-process: invalid requests throw jet::Error naming the problem, and the same
// engine then serves a valid request (nothing half-done is left behind).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "core/error.h"
#include "jet/engine.h"
#include "engine_test_util.h"

namespace {

using jet::test::greedy;

std::string tiny_model_dir() {
  static const std::string dir = jet::test::tiny_model_folder("--arch sdar --seed 5");
  return dir;
}

void expect_error(jet::Engine& engine, const std::vector<jet::Prompt>& prompts, const jet::SamplingParams& p,
                  const std::string& fragment) {
  try {
    engine.generate(prompts, {p});
    FAIL() << "expected an error containing '" << fragment << "'";
  } catch (const jet::Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(EngineErrors, BadRequestsLeaveTheEngineUsable) {
  jet::EngineOptions opts;
  opts.model = tiny_model_dir();
  opts.device = "cpu";
  jet::Engine engine(opts);
  const std::vector<jet::Prompt> prompts = {std::vector<int32_t>{5, 6, 7, 8, 9}};
  const auto reference = engine.generate(prompts, {greedy(8)});
  ASSERT_EQ(reference[0].completion_ids.size(), 8u);

  expect_error(engine, {}, greedy(8), "prompt list is empty");
  expect_error(engine, {std::vector<int32_t>{}}, greedy(8), "prompt 0: the prompt is empty");
  expect_error(engine, {prompts[0], std::vector<int32_t>{}}, greedy(8), "prompt 1: the prompt is empty");

  auto bad = greedy(8);
  bad.temperature = -0.5;
  expect_error(engine, prompts, bad, "temperature");
  bad = greedy(8);
  bad.remasking_strategy = "nope";
  expect_error(engine, prompts, bad, "entropy_bounded");
  bad = greedy(8);
  bad.denoising_steps = 9;
  expect_error(engine, prompts, bad, "denoising_steps");
  bad = greedy(8);
  bad.sub_block_length = 3;  // must divide block_length 4
  expect_error(engine, prompts, bad, "sub_block_length must divide block_length = 4");
  bad = greedy(8);
  bad.sub_block_length = 2;  // S = 4 steps per sub-block of 2
  bad.denoising_steps = 4;
  expect_error(engine, prompts, bad, "denoising_steps must be in [1, sub_block_length = 2], got 4");
  bad = greedy(8);
  bad.editing_threshold = 1.5;
  expect_error(engine, prompts, bad, "editing_threshold must be in [0, 1] (or unset: off), got 1.5");
  bad = greedy(8);
  bad.editing_threshold = 0.5;
  bad.sub_block_length = 2;
  bad.denoising_steps = 2;
  expect_error(engine, prompts, bad, "editing_threshold cannot be combined with sub_block_length (2)");
  bad = greedy(8);
  bad.max_post_steps = 1025;
  expect_error(engine, prompts, bad, "max_post_steps must be in [0, 1024], got 1025");
  bad = greedy(8);
  bad.epsilon_greedy = 1.5;
  expect_error(engine, prompts, bad, "epsilon_greedy must be in [0, 1]");
  bad = greedy(8);
  bad.diversity_enforce_barrier = -2;
  expect_error(engine, prompts, bad, "diversity_enforce_barrier must be >= 0");
  expect_error(engine, {std::vector<int32_t>(5000, 3)}, greedy(8), "more than max_model_len");
  // A later prompt's error is reported before any prompt runs.
  expect_error(engine, {prompts[0], std::vector<int32_t>{-1}}, greedy(8), "prompt 1");

  const auto again = engine.generate(prompts, {greedy(8)});
  EXPECT_EQ(again[0].token_ids, reference[0].token_ids);
}

TEST(EngineErrors, CheckParamsGivesGeneratesErrorWithoutAPrompt) {
  jet::EngineOptions opts;
  opts.model = tiny_model_dir();
  opts.device = "cpu";
  jet::Engine engine(opts);
  EXPECT_NO_THROW(engine.check_params(greedy(8)));
  auto bad = greedy(8);
  bad.denoising_steps = 9;  // a rule that needs the engine: S <= block_length
  try {
    engine.check_params(bad);
    FAIL() << "expected check_params to reject denoising_steps 9";
  } catch (const jet::Error& e) {
    EXPECT_STREQ(e.what(), "denoising_steps must be in [1, block_length = 4], got 9");
  }
  expect_error(engine, {std::vector<int32_t>{5, 6, 7}}, bad,
               "prompt 0: denoising_steps must be in [1, block_length = 4]");
}

TEST(EngineErrors, HugeMaxTokensStillMeetsTheCacheCheck) {
  jet::EngineOptions opts;
  opts.model = tiny_model_dir();
  opts.device = "cpu";
  opts.num_kvcache_pages = 2;  // 512 tokens: less than max_model_len
  jet::Engine engine(opts);
  auto p = greedy(8);
  p.max_tokens = INT32_MAX;  // the sequence's longest length must not overflow into "fits"
  expect_error(engine, {std::vector<int32_t>{5, 6, 7}}, p, "may grow to 4096 tokens, more than the whole KV cache");
  p.max_tokens = 8;
  EXPECT_EQ(engine.generate({std::vector<int32_t>{5, 6, 7}}, {p})[0].completion_ids.size(), 8u);
}

TEST(EngineErrors, BadOptionsAreRejected) {
  jet::EngineOptions opts;
  opts.model = tiny_model_dir();
  opts.device = "cpu";
  opts.kvcache_page_size = 0;
  EXPECT_THROW(jet::Engine{opts}, jet::Error);
  opts.kvcache_page_size = 256;
  opts.max_model_len = 64;
  opts.block_length = 65;  // no block would fit in a sequence
  EXPECT_THROW(jet::Engine{opts}, jet::Error);
  opts.max_model_len = 4096;
  opts.block_length = 0;
  opts.mask_token_id = 1 << 30;
  EXPECT_THROW(jet::Engine{opts}, jet::Error);
  opts.mask_token_id = -1;
  for (double share : {0.0, -0.5, 1.5}) {
    opts.gpu_memory_utilization = share;
    EXPECT_THROW(jet::Engine{opts}, jet::Error) << share;
  }
  opts.gpu_memory_utilization = 0.9;
  // -2 was taken as "all cores"; 2^31 - 1 made OpenMP start threads until the process crashed.
  for (int threads : {-2, 4097, 2147483647}) {
    opts.num_threads = threads;
    try {
      jet::Engine engine{opts};
      ADD_FAILURE() << "num_threads " << threads << " was accepted";
    } catch (const jet::Error& e) {
      EXPECT_NE(std::string(e.what()).find("num_threads must be in [0, 4096] (0 = all cores), got " +
                                           std::to_string(threads)),
                std::string::npos)
          << e.what();
    }
  }
  opts.num_threads = 0;
  opts.device = "tpu";
  EXPECT_THROW(jet::Engine{opts}, jet::Error);
  opts.device = "cpu";
  opts.model = "/nonexistent/model";
  EXPECT_THROW(jet::Engine{opts}, jet::Error);
}

TEST(EngineErrors, AChatTemplateThatDoesNotCompileIsNamedByEveryChatRequest) {
  // The template is read at start-up; before, its error went to the debug log and each chat
  // request was told only that the folder had no template.
  const std::string dir = jet::test::tiny_model_folder("--arch sdar --seed 11");
  { std::ofstream(dir + "/chat_template.jinja") << "{% if %}"; }
  jet::EngineOptions opts;
  opts.model = dir;
  opts.device = "cpu";
  jet::Engine engine(opts);
  try {
    engine.apply_chat_template({{"user", "hi"}}, {});
    FAIL() << "a broken template rendered";
  } catch (const jet::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("has no usable chat template: "), std::string::npos) << message;
    EXPECT_NE(message.find("tokenizer_config.json"), std::string::npos) << message;
  }
  // Requests without the template still run.
  EXPECT_EQ(engine.generate({std::vector<int32_t>{5, 6, 7}}, {greedy(4)})[0].completion_ids.size(), 4u);
}
