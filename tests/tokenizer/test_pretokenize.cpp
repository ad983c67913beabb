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

// Qwen3's normaliser and pre-tokenizer, built from its tokenizer.json once.
struct Qwen3Split {
  tokenizer::Normalizer normalizer;
  tokenizer::PreTokenizer pre_tokenizer;
};

const Qwen3Split& qwen3_split_steps() {
  static const Qwen3Split steps = [] {
    std::ifstream in(test::qwen3_dir() + "/tokenizer.json");
    const auto spec = nlohmann::json::parse(in);
    return Qwen3Split{tokenizer::Normalizer::from_json(spec.at("normalizer")),
                      tokenizer::PreTokenizer::from_json(spec.at("pre_tokenizer"))};
  }();
  return steps;
}

std::vector<std::string> split(const std::string& text) {
  std::string scratch;
  const Qwen3Split& steps = qwen3_split_steps();
  return steps.pre_tokenizer.split(steps.normalizer.apply(text, scratch));
}

TEST(Qwen3PreTokenize, PiecesMatchHuggingFace) {
  const auto cases = test::read_cases("qwen3_pretokenize_cases.jsonl");
  ASSERT_EQ(cases.size(), 79u);
  for (const auto& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    if (name == kUnicode15Case) continue;
    SCOPED_TRACE(name);
    EXPECT_EQ(split(c.at("text").get<std::string>()), c.at("pieces").get<std::vector<std::string>>());
  }
}

TEST(Qwen3PreTokenize, Unicode15LettersAreTheOnlyKnownDifference) {
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
