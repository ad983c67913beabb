// Loading speed of the real Qwen3 tokenizer.json, and encoding from several threads at once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "tokenizer_test_support.h"

namespace jet {
namespace {

TEST(Qwen3Load, TokenizerJsonLoadsQuickly) {
  const auto start = std::chrono::steady_clock::now();
  const Tokenizer t = Tokenizer::from_file(test::qwen3_dir() + "/tokenizer.json");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("Qwen3 tokenizer.json loaded in %.3f s (target < 0.5 s on a quiet machine)\n", seconds);
  EXPECT_EQ(t.size(), 151669u);
  EXPECT_LT(seconds, 2.0);  // loose: shared CI machines vary
}

TEST(Qwen3Threads, ConcurrentEncodesAgree) {
  const auto cases = test::read_cases("qwen3_tokenizer_cases.jsonl");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (size_t t = 0; t < mismatches.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (const auto& c : cases) {
          if (test::qwen3().encode(c.at("text").get<std::string>()) != c.at("ids").get<std::vector<int32_t>>()) {
            ++mismatches[t];
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace jet
