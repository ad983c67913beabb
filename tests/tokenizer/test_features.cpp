// Single tokenizer.json features on tiny synthetic tokenizers, whose ids are easy to predict:
// id b is byte b, and merged tokens follow from 256 on in merge order.
#include <gtest/gtest.h>

#include "tokenizer_test_support.h"

namespace jet {
namespace {

using nlohmann::json;
using test::byte_ids;
using test::tiny_tokenizer_json;
using Ids = std::vector<int32_t>;

Tokenizer load(const json& spec) { return Tokenizer::from_file(test::write_temp_file("tokenizer.json", spec.dump())); }

json added_token(int id, const std::string& content, bool special = false) {
  return {{"id", id},        {"content", content}, {"special", special}, {"single_word", false},
          {"lstrip", false}, {"rstrip", false},    {"normalized", false}};
}

// A tiny tokenizer whose vocabulary also has `extra` (in byte-level form) at ids 300, 301, ...
json with_extra_vocab(json spec, const std::vector<std::string>& extra) {
  int id = 300;
  for (const std::string& token : extra) spec["model"]["vocab"][token] = id++;
  return spec;
}

TEST(BpeMerges, LowestRankWinsWhateverTheOrderInTheText) {
  EXPECT_EQ(load(tiny_tokenizer_json({{"b", "c"}, {"a", "b"}})).encode("abc"), (Ids{97, 256}));
  EXPECT_EQ(load(tiny_tokenizer_json({{"a", "b"}, {"b", "c"}})).encode("abc"), (Ids{256, 99}));
}

TEST(BpeMerges, LeftmostPairWinsATie) {
  const Tokenizer t = load(tiny_tokenizer_json({{"a", "a"}}));
  EXPECT_EQ(t.encode("aaa"), (Ids{256, 97}));
  EXPECT_EQ(t.encode("aaaa"), (Ids{256, 256}));
}

TEST(BpeMerges, MergedTokensMergeFurther) {
  const Tokenizer t = load(tiny_tokenizer_json({{"a", "b"}, {"ab", "c"}, {"c", "d"}}));
  EXPECT_EQ(t.encode("abcd"), (Ids{257, 100}));  // ab+c (rank 1) before c+d (rank 2)
  EXPECT_EQ(t.decode(Ids{257, 100}), "abcd");
}

TEST(BpeMerges, OlderStringNotationGivesTheSameResult) {
  json spec = tiny_tokenizer_json({{"a", "b"}, {"ab", "c"}});
  spec["model"]["merges"] = {"a b", "ab c"};
  EXPECT_EQ(load(spec).encode("abc"), (Ids{257}));
}

TEST(BpeMerges, IgnoreMergesTakesWholeVocabularyTokens) {
  json spec = with_extra_vocab(tiny_tokenizer_json(), {"abc"});  // no merge leads to "abc"
  EXPECT_EQ(load(spec).encode("abc"), (Ids{97, 98, 99}));
  spec["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(spec).encode("abc xabc"), (Ids{300, 32, 120, 97, 98, 99}));
}

TEST(ByteLevelPreTokenizer, AddPrefixSpaceToEverySegment) {
  json spec = tiny_tokenizer_json();
  spec["pre_tokenizer"]["add_prefix_space"] = true;
  spec["added_tokens"] = json::array({added_token(300, "<x>")});
  spec["model"]["vocab"]["<x>"] = 300;
  const Tokenizer t = load(spec);
  EXPECT_EQ(t.encode("hi"), byte_ids(" hi"));
  EXPECT_EQ(t.encode(" hi"), byte_ids(" hi"));
  Ids expected = byte_ids(" hi");
  expected.push_back(300);
  for (int32_t id : byte_ids(" yo")) expected.push_back(id);
  EXPECT_EQ(t.encode("hi<x>yo"), expected);
}

TEST(ByteLevelPreTokenizer, UseRegexDecidesWhereMergesMayApply) {
  json spec = tiny_tokenizer_json({{"a", " "}});
  EXPECT_EQ(load(spec).encode("a b"), (Ids{97, 32, 98}));  // GPT-2 split: "a" | " b"
  spec["pre_tokenizer"]["use_regex"] = false;
  EXPECT_EQ(load(spec).encode("a b"), (Ids{256, 98}));
}

TEST(SplitPreTokenizer, LiteralStringPatternIsNotARegex) {
  json spec = tiny_tokenizer_json({{"a", "("}, {"(", "b"}});
  spec["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"String", "("}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  EXPECT_EQ(load(spec).encode("a(b"), (Ids{97, 40, 98}));
}

json template_processing() {
  return {{"type", "TemplateProcessing"},
          {"single",
           {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
            {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
            {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
          {"pair", json::array()},
          {"special_tokens",
           {{"<s>", {{"id", "<s>"}, {"ids", json::array({300})}, {"tokens", json::array({"<s>"})}}},
            {"</s>", {{"id", "</s>"}, {"ids", json::array({301})}, {"tokens", json::array({"</s>"})}}}}}};
}

json with_bos_eos(json spec) {
  spec["added_tokens"] = json::array({added_token(300, "<s>", true), added_token(301, "</s>", true)});
  return spec;
}

TEST(PostProcessor, TemplateAddsSpecialTokensOnlyWhenAsked) {
  json spec = with_bos_eos(tiny_tokenizer_json());
  spec["post_processor"] = template_processing();
  const Tokenizer t = load(spec);
  EXPECT_EQ(t.encode("hi"), (Ids{104, 105}));
  EXPECT_EQ(t.encode("hi", true), (Ids{300, 104, 105, 301}));
  EXPECT_EQ(t.encode("", true), (Ids{300, 301}));
  EXPECT_EQ(t.decode(Ids{300, 104, 105, 301}), "<s>hi</s>");
  EXPECT_EQ(t.decode(Ids{300, 104, 105, 301}, true), "hi");
}

TEST(PostProcessor, SequenceAsInLlama3) {
  json spec = with_bos_eos(tiny_tokenizer_json());
  spec["post_processor"] = {{"type", "Sequence"},
                            {"processors", {{{"type", "ByteLevel"}, {"trim_offsets", false}}, template_processing()}}};
  EXPECT_EQ(load(spec).encode("hi", true), (Ids{300, 104, 105, 301}));
}

TEST(AddedTokens, LeftmostLongestMatch) {
  json spec = tiny_tokenizer_json();
  spec["added_tokens"] = json::array({added_token(300, "<a>"), added_token(301, "<a><b>"), added_token(302, "b>")});
  const Tokenizer t = load(spec);
  EXPECT_EQ(t.encode("x<a><b>y"), (Ids{120, 301, 121}));
  EXPECT_EQ(t.encode("<a><c>"), (Ids{300, 60, 99, 62}));
  EXPECT_EQ(t.encode("<ab>"), (Ids{60, 97, 302}));
  EXPECT_EQ(t.token_to_id("<a><b>"), 301);
}

TEST(AddedTokens, LstripAndRstripTakeTheWhiteSpaceAround) {
  json spec = tiny_tokenizer_json();
  spec["added_tokens"] = json::array({added_token(300, "<l>"), added_token(301, "<r>")});
  spec["added_tokens"][0]["lstrip"] = true;
  spec["added_tokens"][1]["rstrip"] = true;
  const Tokenizer t = load(spec);
  EXPECT_EQ(t.encode("a \t<l> b"), (Ids{97, 300, 32, 98}));
  EXPECT_EQ(t.encode("a <r> \u3000b"), (Ids{97, 32, 301, 98}));
}

TEST(AddedTokens, SingleWordOnlyMatchesWholeWords) {
  json spec = tiny_tokenizer_json();
  spec["added_tokens"] = json::array({added_token(300, "ab")});
  spec["added_tokens"][0]["single_word"] = true;
  const Tokenizer t = load(spec);
  EXPECT_EQ(t.encode("ab cd"), (Ids{300, 32, 99, 100}));
  EXPECT_EQ(t.encode("(ab)"), (Ids{40, 300, 41}));
  EXPECT_EQ(t.encode("xab"), (Ids{120, 97, 98}));
  EXPECT_EQ(t.encode("ab_"), (Ids{97, 98, 95}));
}

TEST(AddedTokens, NormalizedTokensMatchNormalizedText) {
  json spec = tiny_tokenizer_json();
  spec["normalizer"] = {{"type", "NFC"}};
  spec["added_tokens"] = json::array({added_token(300, "\u01D8")});  // u with diaeresis and acute, precomposed
  spec["added_tokens"][0]["normalized"] = true;
  EXPECT_EQ(load(spec).encode("u\u0308\u0301!"), (Ids{300, 33}));
  spec["added_tokens"][0]["normalized"] = false;  // the raw, decomposed text does not contain it
  EXPECT_EQ(load(spec).encode("u\u0308\u0301!"), (Ids{0xC7, 0x98, 33}));
}

TEST(AddedTokens, AddTokenAtRuntime) {
  Tokenizer t = load(tiny_tokenizer_json());
  EXPECT_EQ(t.size(), 256u);
  t.add_token("<|MASK|>", 400, false);
  EXPECT_EQ(t.size(), 401u);
  EXPECT_EQ(t.encode("a<|MASK|>"), (Ids{97, 400}));
  EXPECT_EQ(t.id_to_token(400), "<|MASK|>");
  EXPECT_EQ(t.id_to_token(399), "");
  EXPECT_FALSE(t.is_special(400));
  t.add_token("<|MASK|>", 400, true);  // the same token again only changes `special`
  EXPECT_TRUE(t.is_special(400));
  EXPECT_EQ(t.decode(Ids{97, 400}, true), "a");
}

TEST(Normalizers, FormsAndSequences) {
  json spec = tiny_tokenizer_json();
  EXPECT_EQ(load(spec).encode("e\u0301"), byte_ids("e\u0301"));  // null: unchanged
  spec["normalizer"] = {{"type", "NFKC"}};
  EXPECT_EQ(load(spec).encode("\uFB01"), byte_ids("fi"));  // ligature
  spec["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "NFD"}}}}};
  EXPECT_EQ(load(spec).encode("\u00E9"), byte_ids("e\u0301"));
  spec["normalizer"] = {{"type", "NFKD"}};
  EXPECT_EQ(load(spec).encode("\u00B2"), byte_ids("2"));
}

TEST(TokenizerConfig, AddsMissingTokensAndNamesSpecialIds) {
  json spec = tiny_tokenizer_json();
  spec["added_tokens"] = json::array({added_token(300, "<|endoftext|>", true)});
  const json config = {{"added_tokens_decoder",
                        {{"300", {{"content", "<|endoftext|>"}, {"special", true}}},
                         {"301", {{"content", "<|MASK|>"}, {"special", false}, {"normalized", false}}}}},
                       {"eos_token", {{"content", "<|endoftext|>"}, {"lstrip", false}}},
                       {"pad_token", "<|MASK|>"},
                       {"bos_token", nullptr}};
  const Tokenizer t = Tokenizer::from_dir(test::write_temp_dir(spec, config));
  EXPECT_EQ(t.token_to_id("<|MASK|>"), 301);
  EXPECT_EQ(t.encode("x<|MASK|>"), (Ids{120, 301}));
  EXPECT_EQ(t.eos_id(), 300);
  EXPECT_EQ(t.pad_id(), 301);
  EXPECT_EQ(t.bos_id(), -1);
}

TEST(TokenizerConfig, TokensNamedSpecialAreSpecialAsInTransformers) {
  // SDAR's tokenizer_config.json: <|MASK|> is "special": false in added_tokens_decoder but listed in
  // additional_special_tokens; transformers then adds it as special (decode skips it).
  json spec = tiny_tokenizer_json();
  const json decoder = {{"301", {{"content", "<|MASK|>"}, {"special", false}, {"normalized", false}}},
                        {"302", {{"content", "<x>"}, {"special", false}, {"normalized", false}}},
                        {"303", {{"content", "<y>"}, {"special", false}, {"normalized", false}}}};
  const json config = {{"added_tokens_decoder", decoder},
                       {"additional_special_tokens", {"<|MASK|>", {{"content", "<x>"}}}},
                       {"eos_token", "<y>"}};
  const Tokenizer t = Tokenizer::from_dir(test::write_temp_dir(spec, config));
  EXPECT_TRUE(t.is_special(301));
  EXPECT_TRUE(t.is_special(302));
  EXPECT_TRUE(t.is_special(303));  // a named special token
  EXPECT_EQ(t.decode(Ids{120, 301, 302, 303}, /*skip_special_tokens=*/true), t.decode(Ids{120}));
  const Tokenizer plain = Tokenizer::from_dir(test::write_temp_dir(spec, {{"added_tokens_decoder", decoder}}));
  EXPECT_FALSE(plain.is_special(301));
  EXPECT_EQ(plain.decode(Ids{301}, true), "<|MASK|>");
}

TEST(TokenizerConfig, OptionalInADirectory) {
  const Tokenizer t = Tokenizer::from_dir(test::write_temp_dir(tiny_tokenizer_json(), nullptr));
  EXPECT_EQ(t.eos_id(), -1);
  EXPECT_EQ(t.encode("ok"), byte_ids("ok"));
}

}  // namespace
}  // namespace jet
