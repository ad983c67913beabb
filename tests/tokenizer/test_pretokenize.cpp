// The normaliser + pre-tokenizer split step of the Qwen3 tokenizer against HF's pieces.
#include <gtest/gtest.h>

#include <fstream>

#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer_test_support.h"

namespace jet {
namespace {

// Known engine difference: PCRE2 10.42 has Unicode 14 tables, so U+31350 (CJK Ext. H) and
// U+11F04 (Kawi), letters since Unicode 15, are not \p{L} and split off. The ids do not change
// (the ids case of the same name passes), because BPE sees the same bytes either way.
constexpr const char* kUnicode15Case = "unicode15_new_letters";

class Qwen3PreTokenize : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::ifstream in(test::qwen3_dir() + "/tokenizer.json");
    const auto spec = nlohmann::json::parse(in);
    normalizer_ = new tokenizer::Normalizer(tokenizer::Normalizer::from_json(spec.at("normalizer")));
    pre_tokenizer_ = new tokenizer::PreTokenizer(tokenizer::PreTokenizer::from_json(spec.at("pre_tokenizer")));
  }
  static void TearDownTestSuite() {
    delete normalizer_;
    delete pre_tokenizer_;
  }
  static std::vector<std::string> split(const std::string& text) {
    std::string scratch;
    return pre_tokenizer_->split(normalizer_->apply(text, scratch));
  }
  static inline tokenizer::Normalizer* normalizer_ = nullptr;
  static inline tokenizer::PreTokenizer* pre_tokenizer_ = nullptr;
};

TEST_F(Qwen3PreTokenize, PiecesMatchHuggingFace) {
  const auto cases = test::read_cases("qwen3_pretokenize_cases.jsonl");
  ASSERT_EQ(cases.size(), 79u);
  for (const auto& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    if (name == kUnicode15Case) continue;
    SCOPED_TRACE(name);
    EXPECT_EQ(split(c.at("text").get<std::string>()), c.at("pieces").get<std::vector<std::string>>());
  }
}

TEST_F(Qwen3PreTokenize, Unicode15LettersAreTheOnlyKnownDifference) {
  for (const auto& c : test::read_cases("qwen3_pretokenize_cases.jsonl")) {
    if (c.at("name") != kUnicode15Case) continue;
    const auto pieces = split(c.at("text").get<std::string>());
    EXPECT_NE(pieces, c.at("pieces").get<std::vector<std::string>>())
        << "the regex engine now knows Unicode 15 letters: fold this case into PiecesMatchHuggingFace";
  }
  for (const auto& c : test::read_cases("qwen3_tokenizer_cases.jsonl")) {
    if (c.at("name") != kUnicode15Case) continue;
    EXPECT_EQ(test::qwen3().encode(c.at("text").get<std::string>()), c.at("ids").get<std::vector<int32_t>>());
    return;
  }
  FAIL() << "no ids case named " << kUnicode15Case;
}

}  // namespace
}  // namespace jet
