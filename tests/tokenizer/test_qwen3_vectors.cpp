// The Qwen3 tokenizer against HuggingFace `tokenizers` (tests/data/tokenizer/*.jsonl): ids,
// decoding, SDAR's <|MASK|>, and the incremental decoder on every case.
#include <gtest/gtest.h>

#include "core/utf8.h"
#include "tokenizer_test_support.h"

namespace jet {
namespace {

using test::qwen3;
using test::read_cases;

std::vector<int32_t> ids_of(const nlohmann::json& c) { return c.at("ids").get<std::vector<int32_t>>(); }

TEST(Qwen3Vectors, EncodeMatchesHuggingFaceIds) {
  const auto cases = read_cases("qwen3_tokenizer_cases.jsonl");
  ASSERT_EQ(cases.size(), 87u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    EXPECT_EQ(qwen3().encode(c.at("text").get<std::string>()), ids_of(c));
  }
}

TEST(Qwen3Vectors, AddSpecialTokensAddsNothingForQwen3) {
  // Qwen3's post-processor is ByteLevel: no BOS/EOS.
  for (const auto& c : read_cases("qwen3_tokenizer_cases.jsonl")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    EXPECT_EQ(qwen3().encode(c.at("text").get<std::string>(), true), ids_of(c));
  }
}

TEST(Qwen3Vectors, SizesAreTransformersVocabSizeAndLen) {
  // transformers: vocab_size 151,643 (model.vocab alone), len(tokenizer) 151,669 (26 added tokens).
  EXPECT_EQ(qwen3().model_vocab_size(), 151643u);
  EXPECT_EQ(qwen3().size(), 151669u);
}

TEST(Qwen3Vectors, DecodeGivesTextOrItsNfc) {
  for (const auto& c : read_cases("qwen3_tokenizer_cases.jsonl")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const std::string expected = c.value("decoded", c.at("text").get<std::string>());
    EXPECT_EQ(qwen3().decode(ids_of(c)), expected);
  }
}

TEST(Qwen3Vectors, DecodeCases) {
  const auto cases = read_cases("qwen3_decode_cases.jsonl");
  ASSERT_EQ(cases.size(), 8u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.dump());
    EXPECT_EQ(qwen3().decode(ids_of(c), c.at("skip_special_tokens").get<bool>()), c.at("text").get<std::string>());
  }
}

TEST(Qwen3Vectors, SdarMaskTokenAddedByHand) {
  Tokenizer sdar = Tokenizer::from_dir(test::qwen3_dir());
  EXPECT_EQ(sdar.token_to_id("<|MASK|>"), -1);
  sdar.add_token("<|MASK|>", 151669, false);
  EXPECT_EQ(sdar.size(), 151670u);
  EXPECT_FALSE(sdar.is_special(151669));
  const auto cases = read_cases("sdar_mask_cases.jsonl");
  ASSERT_EQ(cases.size(), 5u);
  for (const auto& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    SCOPED_TRACE(text);
    EXPECT_EQ(sdar.encode(text), ids_of(c));
    EXPECT_EQ(sdar.decode(ids_of(c)), text);
  }
}

TEST(Qwen3Vectors, VocabularyFacts) {
  const Tokenizer& t = qwen3();
  EXPECT_EQ(t.size(), 151669u);
  EXPECT_EQ(t.token_to_id("Hello"), 9707);
  EXPECT_EQ(t.token_to_id("ĠHello"), 21927);
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(t.token_to_id("no such token"), -1);
  EXPECT_EQ(t.id_to_token(9707), "Hello");
  EXPECT_EQ(t.id_to_token(151644), "<|im_start|>");
  EXPECT_EQ(t.id_to_token(151669), "");
  EXPECT_EQ(t.id_to_token(-1), "");
  EXPECT_TRUE(t.is_special(151643));
  EXPECT_TRUE(t.is_special(151656));
  EXPECT_FALSE(t.is_special(151657));  // <tool_call>: added but not special
  EXPECT_FALSE(t.is_special(9707));
  EXPECT_FALSE(t.is_special(200000));
  // From tokenizer_config.json.
  EXPECT_EQ(t.eos_id(), 151645);
  EXPECT_EQ(t.pad_id(), 151643);
  EXPECT_EQ(t.bos_id(), -1);
}

TEST(Qwen3Vectors, UnknownIdsDecodeToNothing) {
  const Tokenizer& t = qwen3();
  std::vector<int32_t> padding_rows;
  for (int32_t id = 151669; id < 151936; ++id) padding_rows.push_back(id);
  EXPECT_EQ(t.decode(padding_rows), "");
  const std::vector<int32_t> mixed = {9707, 151700, -5, 1879, 2147483647};
  EXPECT_EQ(t.decode(mixed), "Hello world");
}

TEST(Qwen3Vectors, TokenBytesAreEachTokensOwn) {
  const Tokenizer& t = qwen3();
  // 11162 = " " + the first two bytes of U+1F30D, 234 and 235 its last two: not UTF-8 alone.
  EXPECT_EQ(t.token_bytes(11162), " \xF0\x9F");
  EXPECT_EQ(t.token_bytes(234), "\x8C");
  EXPECT_EQ(t.token_bytes(11162) + t.token_bytes(234) + t.token_bytes(235),
            t.decode(std::vector<int32_t>{11162, 234, 235}));
  EXPECT_EQ(t.token_bytes(151645), "<|im_end|>");
  EXPECT_EQ(t.token_bytes(151645, /*skip_special_tokens=*/true), "");
  EXPECT_EQ(t.token_bytes(151700), "");
  EXPECT_EQ(t.token_bytes(-5), "");
}

// Pushes ids one at a time; checks each piece is whole characters and the total equals decode.
void expect_incremental_matches_decode(const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDecoder decoder(qwen3(), skip_special);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = decoder.push(id);
    EXPECT_FALSE(utf8::first_invalid_offset(piece).has_value());
    streamed += piece;
  }
  streamed += decoder.finish();
  EXPECT_EQ(streamed, qwen3().decode(ids, skip_special));
}

TEST(Qwen3Vectors, IncrementalDecoderEqualsDecode) {
  for (const char* file : {"qwen3_tokenizer_cases.jsonl", "qwen3_decode_cases.jsonl"}) {
    for (const auto& c : read_cases(file)) {
      SCOPED_TRACE(c.dump());
      expect_incremental_matches_decode(ids_of(c), false);
      expect_incremental_matches_decode(ids_of(c), true);
    }
  }
}

TEST(Qwen3Vectors, IncrementalDecoderHoldsBackPartialCharacters) {
  // 11162 = " " + first byte of U+1F30D, 234 and 235 its other bytes.
  IncrementalDecoder decoder(qwen3());
  EXPECT_EQ(decoder.push(11162), " ");
  EXPECT_EQ(decoder.push(234), "");
  EXPECT_EQ(decoder.push(235), "\xF0\x9F\x8C\x8D");
  EXPECT_EQ(decoder.finish(), "");
  // A dangling tail becomes one U+FFFD at the end, as decode({11162, 234}) gives.
  EXPECT_EQ(decoder.push(11162), " ");
  EXPECT_EQ(decoder.push(234), "");
  EXPECT_EQ(decoder.finish(), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace jet
