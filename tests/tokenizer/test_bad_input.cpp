// Bad tokenizer files and bad text: each must give a jet::Error whose message names the
// problem (file, field, value), never a crash.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer_test_support.h"

namespace jet {
namespace {

using nlohmann::json;
using test::tiny_tokenizer_json;

// The message of the jet::Error that `action` throws ("" if it throws none).
template <typename Action>
std::string error_of(Action&& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string load_error_of_text(const std::string& file_content) {
  const std::string path = test::write_temp_file("tokenizer.json", file_content);
  const std::string message = error_of([&] { Tokenizer::from_file(path); });
  EXPECT_NE(message.find(path), std::string::npos) << "the message should name the file: " << message;
  return message;
}

std::string load_error(const json& spec) { return load_error_of_text(spec.dump()); }

#define EXPECT_MESSAGE_HAS(message, part) EXPECT_PRED_FORMAT2(::testing::IsSubstring, part, message)

TEST(BadTokenizerFile, NotJson) {
  EXPECT_MESSAGE_HAS(load_error_of_text("{\"model\": {"), "not valid JSON");
  EXPECT_MESSAGE_HAS(load_error_of_text(""), "not valid JSON");
}

TEST(BadTokenizerFile, MissingFile) {
  EXPECT_MESSAGE_HAS(error_of([] { Tokenizer::from_file("/nonexistent/tokenizer.json"); }),
                     "/nonexistent/tokenizer.json");
  EXPECT_MESSAGE_HAS(error_of([] { Tokenizer::from_dir("/nonexistent/model"); }), "/nonexistent/model");
}

TEST(BadTokenizerFile, DevicesAndFoldersAreNotRead) {
  // /dev/zero would be read until memory ran out.
  EXPECT_MESSAGE_HAS(error_of([] { Tokenizer::from_file("/dev/zero"); }), "/dev/zero is not a regular file");
  EXPECT_MESSAGE_HAS(error_of([] { Tokenizer::from_file("/tmp"); }), "/tmp is not a regular file");
}

TEST(BadTokenizerFile, WrongStructure) {
  EXPECT_MESSAGE_HAS(load_error_of_text("[1, 2]"), "top level must be a JSON object");
  json spec = tiny_tokenizer_json();
  spec.erase("model");
  EXPECT_MESSAGE_HAS(load_error(spec), "model is missing");
  spec = tiny_tokenizer_json();
  spec["model"]["type"] = "WordPiece";
  EXPECT_MESSAGE_HAS(load_error(spec), "model.type 'WordPiece' is not supported");
  spec = tiny_tokenizer_json();
  spec["model"].erase("merges");
  EXPECT_MESSAGE_HAS(load_error(spec), "model.merges is missing");
  spec = tiny_tokenizer_json();
  spec["model"]["vocab"] = json::array();
  EXPECT_MESSAGE_HAS(load_error(spec), "model.vocab must be an object");
  spec = tiny_tokenizer_json();
  spec["model"]["dropout"] = 0.1;
  EXPECT_MESSAGE_HAS(load_error(spec), "model.dropout");
}

TEST(BadTokenizerFile, VocabularyIds) {
  json spec = tiny_tokenizer_json();
  spec["model"]["vocab"]["another"] = 5;
  EXPECT_MESSAGE_HAS(load_error(spec), "id 5 is given to both");
  spec = tiny_tokenizer_json();
  spec["model"]["vocab"]["x1"] = "seven";
  EXPECT_MESSAGE_HAS(load_error(spec), "model.vocab[\"x1\"] must be an integer token id");
  spec = tiny_tokenizer_json();
  spec["model"]["vocab"]["x1"] = -3;
  EXPECT_MESSAGE_HAS(load_error(spec), "model.vocab[\"x1\"] = -3 is not a valid token id");
  spec = tiny_tokenizer_json();
  spec["model"]["vocab"]["x1"] = 1 << 30;
  EXPECT_MESSAGE_HAS(load_error(spec), "outside the supported range");
}

TEST(BadTokenizerFile, Merges) {
  json spec = tiny_tokenizer_json({{"a", "b"}});
  spec["model"]["merges"].push_back({"a", "zz"});
  EXPECT_MESSAGE_HAS(load_error(spec), "model.merges[1]: token 'zz' is not in model.vocab");
  spec["model"]["merges"][1] = {"a", "b", "c"};
  EXPECT_MESSAGE_HAS(load_error(spec), "model.merges[1] must be [\"left\", \"right\"]");
  spec["model"]["merges"][1] = "a b c";
  EXPECT_MESSAGE_HAS(load_error(spec), "model.merges[1] = \"a b c\" must be two tokens");
  spec["model"]["merges"][1] = 42;
  EXPECT_MESSAGE_HAS(load_error(spec), "model.merges[1]");
}

TEST(BadTokenizerFile, UnsupportedComponents) {
  json spec = tiny_tokenizer_json();
  spec["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_MESSAGE_HAS(load_error(spec), "unsupported normalizer type 'Lowercase'");
  spec["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Strip"}}}}};
  EXPECT_MESSAGE_HAS(load_error(spec), "normalizer.normalizers[1]: unsupported normalizer type 'Strip'");

  spec = tiny_tokenizer_json();
  spec["pre_tokenizer"] = {{"type", "Metaspace"}};
  EXPECT_MESSAGE_HAS(load_error(spec), "unsupported pre_tokenizer type 'Metaspace'");
  spec["pre_tokenizer"] = nullptr;
  EXPECT_MESSAGE_HAS(load_error(spec), "pre_tokenizer is null");
  spec["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Isolated"}};
  EXPECT_MESSAGE_HAS(load_error(spec), "no ByteLevel step");
  spec["pre_tokenizer"]["behavior"] = "Removed";
  EXPECT_MESSAGE_HAS(load_error(spec), "behavior 'Removed' is not supported");
  spec["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(ab"}}}, {"behavior", "Isolated"}};
  EXPECT_MESSAGE_HAS(load_error(spec), "invalid regex '(ab'");

  spec = tiny_tokenizer_json();
  spec["decoder"] = {{"type", "WordPiece"}};
  EXPECT_MESSAGE_HAS(load_error(spec), "unsupported decoder type 'WordPiece'");
  spec = tiny_tokenizer_json();
  spec["post_processor"] = {{"type", "RobertaProcessing"}};
  EXPECT_MESSAGE_HAS(load_error(spec), "unsupported post_processor type 'RobertaProcessing'");
}

TEST(BadTokenizerFile, AddedTokens) {
  json spec = tiny_tokenizer_json();
  spec["added_tokens"] = json::array({{{"id", 97}, {"content", "<x>"}, {"special", true}}});
  EXPECT_MESSAGE_HAS(load_error(spec), "added_tokens[0]: id 97 is given to both 'a' and '<x>'");
  spec["added_tokens"] = json::array({{{"id", 300}, {"content", ""}, {"special", true}}});
  EXPECT_MESSAGE_HAS(load_error(spec), "empty content");
  spec["added_tokens"] = json::array({{{"id", 300}, {"special", true}}});
  EXPECT_MESSAGE_HAS(load_error(spec), "added_tokens[0].content is missing");
}

TEST(BadTokenizerConfig, UnknownSpecialTokenAndBadKey) {
  const json tokenizer = tiny_tokenizer_json();
  std::string dir = test::write_temp_dir(tokenizer, {{"eos_token", "<nope>"}});
  EXPECT_MESSAGE_HAS(error_of([&] { Tokenizer::from_dir(dir); }), "eos_token '<nope>' is not a token");
  dir = test::write_temp_dir(tokenizer, {{"added_tokens_decoder", {{"abc", {{"content", "<y>"}}}}}});
  EXPECT_MESSAGE_HAS(error_of([&] { Tokenizer::from_dir(dir); }),
                     "added_tokens_decoder[\"abc\"]: the key must be a token id");
  dir = test::write_temp_dir(tokenizer, {{"added_tokens_decoder", {{"98", {{"content", "<y>"}}}}}});
  EXPECT_MESSAGE_HAS(error_of([&] { Tokenizer::from_dir(dir); }),
                     "tokenizer_config.json: added_tokens_decoder[\"98\"]: id 98 is given to both");
}

TEST(BadText, InvalidUtf8NamesTheOffset) {
  const Tokenizer& t = test::qwen3();
  EXPECT_MESSAGE_HAS(error_of([&] {
                       t.encode(
                           "abc\xFF"
                           "def");
                     }),
                     "invalid UTF-8 at byte offset 3 (byte 0xff)");
  EXPECT_MESSAGE_HAS(error_of([&] { t.encode("\xE4\xB8\x96\xE4\xB8"); }), "invalid UTF-8 at byte offset 3");
  EXPECT_MESSAGE_HAS(error_of([&] { t.encode("\xED\xA0\x80"); }), "invalid UTF-8 at byte offset 0");
}

TEST(BadRuntimeToken, ConflictsAreRejected) {
  Tokenizer t = Tokenizer::from_file(test::write_temp_file("tokenizer.json", tiny_tokenizer_json().dump()));
  EXPECT_MESSAGE_HAS(error_of([&] { t.add_token("<x>", 97, false); }), "id 97 is given to both 'a' and '<x>'");
  EXPECT_MESSAGE_HAS(error_of([&] { t.add_token("a", 500, false); }), "token 'a' has two ids, 97 and 500");
  EXPECT_MESSAGE_HAS(error_of([&] { t.add_token("<x>", -1, false); }), "outside the supported range");
  EXPECT_MESSAGE_HAS(error_of([&] { t.add_token("", 300, false); }), "empty content");
}

}  // namespace
}  // namespace jet
