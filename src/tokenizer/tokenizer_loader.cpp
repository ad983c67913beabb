// Building a jet::Tokenizer from tokenizer.json (+ tokenizer_config.json for from_dir), or, for a
// Qwen2-family folder without tokenizer.json (Dream ships the slow tokenizer's files only), from
// vocab.json + merges.txt as transformers' Qwen2 converter turns them into one. Every error is
// re-thrown with the file path in front of the failing field's path.
#include <charconv>
#include <filesystem>
#include <set>
#include <string>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_json_reader.h"

namespace jet {
namespace {

using json_fields::Json;

Json parse_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw Error(str(path, ": not valid JSON: ", e.what()));
  }
}

// Runs `load`, prefixing any error with `path`.
template <typename Load>
auto with_file_context(const std::string& path, Load&& load) {
  try {
    return load();
  } catch (const Error& e) {
    throw Error(str(path, ": ", e.what()));
  } catch (const Json::exception& e) {
    throw Error(str(path, ": ", e.what()));
  }
}

// The field is optional in the file; absent means null.
const Json& optional_component(const Json& root, const char* key) {
  static const Json null_value;
  auto it = root.find(key);
  return it == root.end() ? null_value : *it;
}

void check_decoder(const Json& spec) {
  JET_CHECK(!spec.is_null(), "decoder is null, but only the ByteLevel decoder is supported");
  const std::string type = json_fields::component_type(spec, "decoder");
  JET_CHECK(type == "ByteLevel", "decoder: unsupported decoder type '", type, "' (supported: ByteLevel)");
}

tokenizer::AddedToken added_token_from_json(const Json& spec, int32_t id, const std::string& where) {
  tokenizer::AddedToken token;
  token.id = id;
  token.content = json_fields::require_string(spec, "content", where);
  token.special = json_fields::optional_bool(spec, "special", false, where);
  token.single_word = json_fields::optional_bool(spec, "single_word", false, where);
  token.lstrip = json_fields::optional_bool(spec, "lstrip", false, where);
  token.rstrip = json_fields::optional_bool(spec, "rstrip", false, where);
  // HF's default: special tokens are matched in raw text, others in normalised text.
  token.normalized = json_fields::optional_bool(spec, "normalized", !token.special, where);
  return token;
}

// tokenizer_config.json names a special token as "text" or {"content": "text", ...}.
std::string special_token_text(const Json& value, const std::string& key) {
  JET_CHECK(value.is_object() || value.is_string(), key, " must be a string, an object with ",
            "\"content\", or null; got ", value.dump());
  return value.is_string() ? value.get<std::string>() : json_fields::require_string(value, "content", key);
}

// The texts transformers counts as special tokens (all_special_tokens): the named ones and
// additional_special_tokens.
std::set<std::string> special_token_texts(const Json& config) {
  std::set<std::string> texts;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    auto it = config.find(key);
    if (it != config.end() && !it->is_null()) texts.insert(special_token_text(*it, key));
  }
  const Json& additional = optional_component(config, "additional_special_tokens");
  JET_CHECK(additional.is_null() || additional.is_array(), "additional_special_tokens must be an array");
  for (size_t i = 0; i < additional.size(); ++i) {
    texts.insert(special_token_text(additional[i], str("additional_special_tokens[", i, "]")));
  }
  return texts;
}

// The id of the special token under `key`, or -1 when it is absent or null.
int32_t special_token_id(const Json& config, const char* key, const Tokenizer& tokenizer) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return -1;
  const std::string text = special_token_text(*it, key);
  const int32_t id = tokenizer.token_to_id(text);
  JET_CHECK(id >= 0, key, " '", text, "' is not a token of this tokenizer");
  return id;
}

// The tokenizer classes whose vocab.json + merges.txt mean Qwen2's byte-level BPE: NFC, then
// Qwen2's pre-tokenizer split, then the byte-to-unicode map (Dream's tokenizer is Qwen2's).
bool is_qwen2_tokenizer_class(const std::string& name) {
  return name == "Qwen2Tokenizer" || name == "Qwen2TokenizerFast" || name == "DreamTokenizer";
}

// Qwen2Tokenizer's pre-tokenizer split.
constexpr const char* kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// What tokenizer.json would hold for DIR/vocab.json and DIR/merges.txt (merges.txt: one "left
// right" pair a line, in rank order, after an optional "#version" line).
tokenizer::TokenizerJson qwen2_tokenizer_json(const std::filesystem::path& dir) {
  tokenizer::TokenizerJson file;
  const Json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  file.root = {
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         Json::array(
             {{{"type", "Split"}, {"pattern", {{"Regex", kQwen2Split}}}, {"behavior", "Isolated"}, {"invert", false}},
              byte_level})}}},
      {"decoder", byte_level},
      {"model", {{"type", "BPE"}}},
  };
  const std::string vocab_path = (dir / "vocab.json").string();
  const Json vocab = parse_json_file(vocab_path);
  with_file_context(vocab_path, [&] {
    JET_CHECK(vocab.is_object(), "the top level must be an object {token: id}, got ", vocab.type_name());
    for (const auto& [token, id] : vocab.items()) {
      file.bpe.vocab.emplace_back(token, json_fields::to_token_id(id, "\"" + token + "\""));
    }
  });
  const std::string merges_path = (dir / "merges.txt").string();
  const std::string merges = read_text_file(merges_path);
  with_file_context(merges_path, [&] {
    size_t line_number = 0;
    for (size_t begin = 0; begin < merges.size();) {
      const size_t end = std::min(merges.find('\n', begin), merges.size());
      std::string_view line(merges.data() + begin, end - begin);
      begin = end + 1;
      ++line_number;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
      const size_t space = line.find(' ');
      JET_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                    line.find(' ', space + 1) == std::string_view::npos,
                "line ", line_number, " must be two tokens separated by one space, got '", line, "'");
      file.bpe.merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
    }
  });
  file.bpe.has_vocab = file.bpe.has_merges = true;
  return file;
}

}  // namespace

// The tokenizer a parsed tokenizer.json (or its equivalent) describes.
struct TokenizerBuilder {
  static Tokenizer build(tokenizer::TokenizerJson&& file);
};

Tokenizer Tokenizer::from_file(const std::string& tokenizer_json) {
  const std::string text = read_text_file(tokenizer_json);
  return with_file_context(tokenizer_json,
                           [&] { return TokenizerBuilder::build(tokenizer::read_tokenizer_json(text)); });
}

Tokenizer TokenizerBuilder::build(tokenizer::TokenizerJson&& file) {
  using Impl = Tokenizer::Impl;
  const Json& root = file.root;
  JET_CHECK(root.is_object(), "the top level must be a JSON object, got ", root.type_name());
  // "truncation" and "padding" are ignored: the engine applies its own length limits.
  tokenizer::Vocabulary vocabulary;
  tokenizer::BpeModel model = tokenizer::BpeModel::build(json_fields::require(root, "model", "tokenizer.json"),
                                                         std::move(file.bpe), vocabulary);
  check_decoder(optional_component(root, "decoder"));
  auto impl = std::unique_ptr<Impl>(new Impl{
      .vocabulary = std::move(vocabulary),
      .normalizer = tokenizer::Normalizer::from_json(optional_component(root, "normalizer")),
      .pre_tokenizer = tokenizer::PreTokenizer::from_json(optional_component(root, "pre_tokenizer")),
      .model = std::move(model),
      .post_processor = tokenizer::PostProcessor::from_json(optional_component(root, "post_processor")),
  });
  const Json& added_tokens = optional_component(root, "added_tokens");
  JET_CHECK(added_tokens.is_null() || added_tokens.is_array(), "added_tokens must be an array");
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const std::string where = str("added_tokens[", i, "]");
    const int32_t id = json_fields::to_token_id(json_fields::require(added_tokens[i], "id", where), where + ".id");
    impl->add_token(added_token_from_json(added_tokens[i], id, where), where);
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_dir(const std::string& dir) {
  const std::filesystem::path root(dir);
  const std::string json_path = (root / "tokenizer.json").string();
  const std::string config_path = (root / "tokenizer_config.json").string();
  const bool has_config = std::filesystem::exists(config_path);
  const Json config = has_config ? parse_json_file(config_path) : Json::object();
  Tokenizer tokenizer = [&] {
    if (std::filesystem::exists(json_path) || !std::filesystem::exists(root / "vocab.json"))
      return from_file(json_path);
    const std::string class_name =
        config.is_object() && config.contains("tokenizer_class") && config["tokenizer_class"].is_string()
            ? config["tokenizer_class"].get<std::string>()
            : std::string("(none)");
    JET_CHECK(is_qwen2_tokenizer_class(class_name), dir, " has no tokenizer.json, and its vocab.json + merges.txt ",
              "can be read for Qwen2's byte-level BPE only (tokenizer_config.json's tokenizer_class Qwen2Tokenizer ",
              "or DreamTokenizer), not for tokenizer_class ", class_name);
    const std::string vocab_path = (root / "vocab.json").string();
    return with_file_context(vocab_path, [&] { return TokenizerBuilder::build(qwen2_tokenizer_json(root)); });
  }();
  if (!has_config) return tokenizer;
  with_file_context(config_path, [&] {
    JET_CHECK(config.is_object(), "the top level must be a JSON object, got ", config.type_name());
    const Json& decoder = optional_component(config, "added_tokens_decoder");
    JET_CHECK(decoder.is_null() || decoder.is_object(), "added_tokens_decoder must be an object");
    const std::set<std::string> special_texts = special_token_texts(config);
    for (const auto& [key, spec] : decoder.items()) {
      const std::string where = "added_tokens_decoder[\"" + key + "\"]";
      int32_t id = -1;
      const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
      JET_CHECK(error == std::errc() && end == key.data() + key.size() && id >= 0, where,
                ": the key must be a token id");
      tokenizer::AddedToken token = added_token_from_json(spec, id, where);
      // As transformers adds them: special if marked so or named a special token (SDAR's <|MASK|>
      // is "special": false but listed in additional_special_tokens, so skip_special_tokens drops it).
      token.special = token.special || special_texts.contains(token.content);
      // Tokens tokenizer.json already has are left as they are.
      if (tokenizer.token_to_id(token.content) < 0) tokenizer.impl_->add_token(token, where);
    }
    tokenizer.impl_->eos_id = special_token_id(config, "eos_token", tokenizer);
    tokenizer.impl_->bos_id = special_token_id(config, "bos_token", tokenizer);
    tokenizer.impl_->pad_id = special_token_id(config, "pad_token", tokenizer);
  });
  return tokenizer;
}

}  // namespace jet
