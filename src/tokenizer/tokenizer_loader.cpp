// Building a jet::Tokenizer from tokenizer.json (+ tokenizer_config.json for from_dir).
// Every error is re-thrown with the file path in front of the failing field's path.
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

}  // namespace

Tokenizer Tokenizer::from_file(const std::string& tokenizer_json) {
  const std::string text = read_text_file(tokenizer_json);
  return with_file_context(tokenizer_json, [&] {
    tokenizer::TokenizerJson file = tokenizer::read_tokenizer_json(text);
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
  });
}

Tokenizer Tokenizer::from_dir(const std::string& dir) {
  Tokenizer tokenizer = from_file((std::filesystem::path(dir) / "tokenizer.json").string());
  const std::string config_path = (std::filesystem::path(dir) / "tokenizer_config.json").string();
  if (!std::filesystem::exists(config_path)) return tokenizer;
  const Json config = parse_json_file(config_path);
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
