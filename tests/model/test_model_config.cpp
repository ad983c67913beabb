// ModelConfig: the tiny models of each family, the real configurations (with the defaults for
// keys they omit), and a clear error for each kind of bad config.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "model/model_config.h"
#include "model_test_util.h"
#include "real_configs.h"

using namespace jet;
using namespace jet::test;

namespace {

ModelConfig load(const Json& config, const std::optional<Json>& generation = std::nullopt) {
  return config_from_json(config, generation);
}

// The id of an added token in a tiny model's tokenizer.json.
int64_t added_token_id(const TempDir& dir, const std::string& content) {
  const Json tokenizer = read_json(dir.file("tokenizer.json"));
  for (const Json& token : tokenizer["added_tokens"]) {
    if (token["content"] == content) return token["id"];
  }
  ADD_FAILURE() << "no added token " << content;
  return -1;
}

Json with(Json config, const std::string& key, const Json& value) {
  config[key] = value;
  return config;
}

Json without(Json config, const std::string& key) {
  config.erase(key);
  return config;
}

}  // namespace

TEST(ModelConfig, ReadsTinySdar) {
  TempDir dir;
  ASSERT_TRUE(make_tiny_model("sdar", dir.path(), 1, "--layers 3 --hidden 48 --heads 6 --kv-heads 3 --block-size 8"));
  const ModelConfig c = load_model_config(dir.path());
  EXPECT_EQ(c.family, ModelFamily::SDAR);
  EXPECT_EQ(c.model_type, "sdar");
  EXPECT_EQ(c.layers, 3);
  EXPECT_EQ(c.hidden, 48);
  EXPECT_EQ(c.heads, 6);
  EXPECT_EQ(c.kv_heads, 3);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate, 128);
  EXPECT_EQ(c.block_size, 8);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.block_causal);
  EXPECT_FALSE(c.tied);
  EXPECT_EQ(c.vocab % 64, 0);
  EXPECT_EQ(c.mask_token_id, added_token_id(dir, "<|MASK|>"));
  EXPECT_EQ(c.eos_token_ids,
            (std::vector<int64_t>{added_token_id(dir, "<|im_end|>"), added_token_id(dir, "<|endoftext|>")}));
  EXPECT_EQ(c.bos_token_id, added_token_id(dir, "<|endoftext|>"));
  EXPECT_EQ(c.num_experts, 0);
}

TEST(ModelConfig, ReadsTinySdarMoe) {
  TempDir dir;
  ASSERT_TRUE(make_tiny_model("sdar_moe", dir.path(), 1, "--experts 6 --top-k 3 --moe-intermediate 24"));
  const ModelConfig c = load_model_config(dir.path());
  EXPECT_EQ(c.family, ModelFamily::SDAR_MOE);
  EXPECT_EQ(c.num_experts, 6);
  EXPECT_EQ(c.experts_per_token, 3);
  EXPECT_EQ(c.moe_intermediate, 24);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
}

TEST(ModelConfig, ReadsTinyLlada) {
  TempDir dir;
  ASSERT_TRUE(make_tiny_model("llada", dir.path()));
  const ModelConfig c = load_model_config(dir.path());
  EXPECT_EQ(c.family, ModelFamily::LLADA);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.block_causal);
  EXPECT_EQ(c.mask_token_id, added_token_id(dir, "<|mdm_mask|>"));
  EXPECT_EQ(c.eos_token_ids,
            (std::vector<int64_t>{added_token_id(dir, "<|endoftext|>"), added_token_id(dir, "<|eot_id|>")}));
}

TEST(ModelConfig, ReadsTinyModelWithQwen3Vocabulary) {
  TempDir dir;
  ASSERT_TRUE(make_tiny_model("llada", dir.path(), 1, "--vocab qwen3 --layers 1"));
  const ModelConfig c = load_model_config(dir.path());
  EXPECT_EQ(c.vocab, 151936);
  EXPECT_EQ(c.mask_token_id, 151669);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
}

TEST(ModelConfig, ReadsSdar4bWithDefaultsForOmittedKeys) {
  const ModelConfig c = load(sdar_4b_config());
  EXPECT_EQ(c.hidden, 2560);
  EXPECT_EQ(c.heads * c.head_dim, 4096);  // q width differs from hidden
  EXPECT_EQ(c.kv_heads, 8);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rms_eps, 1e-6);
  EXPECT_EQ(c.max_positions, 32768);
  EXPECT_EQ(c.block_size, 4);
  EXPECT_EQ(c.mask_token_id, 151669);
  // config.json names only <|endoftext|>; chat turns end with <|im_end|>, which is added.
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151643, 151645}));
  EXPECT_EQ(c.bos_token_id, 151643);
}

// JetLM's -bN checkpoints (SDAR-4B-Chat-b64, SDAR-30B-A3B-Chat-b32) and TraceRL's TraDo ship the
// config of the block-4 model, without block_size: the name, then the family's 4, decide.
TEST(ModelConfig, TakesBlockSizeFromTheCheckpointNameWhenConfigLacksIt) {
  TempDir root;
  auto load_named = [&](const std::string& relative, const Json& config) {
    const std::filesystem::path dir = root.path() / relative;
    std::filesystem::create_directories(dir);
    write_json((dir / "config.json").string(), config);
    return load_model_config(dir.string());
  };
  const ModelConfig b64 = load_named("SDAR-4B-Chat-b64", sdar_4b_config());
  EXPECT_EQ(b64.block_size, 64);
  EXPECT_EQ(b64.trained_block_size, 64);
  EXPECT_EQ(b64.block_size_source, "the model's name, SDAR-4B-Chat-b64");
  EXPECT_EQ(load_named("SDAR-30B-A3B-Chat-b32", sdar_30b_moe_config()).block_size, 32);
  // A Hugging Face cache: the repository's name, not the revision's.
  const ModelConfig cached =
      load_named("hub/models--JetLM--SDAR-8B-Chat-b16/snapshots/5f2a9c0", without(sdar_8b_config(), "block_size"));
  EXPECT_EQ(cached.block_size, 16);
  EXPECT_EQ(cached.block_size_source, "the model's name, SDAR-8B-Chat-b16");
  EXPECT_EQ(load_named("SDAR-4B-Chat-b8-FP8/", sdar_4b_config()).block_size, 8);

  const ModelConfig trado = load_named("TraDo-8B-Instruct", without(sdar_8b_config(), "block_size"));
  EXPECT_EQ(trado.block_size, 4);
  EXPECT_EQ(trado.trained_block_size, 4);
  EXPECT_EQ(trado.mask_token_id, 151669);
  EXPECT_EQ(trado.block_size_source, "the family's default: config.json has no block_size");
  EXPECT_EQ(load_named("SDAR-30B-A3B-Chat", sdar_30b_moe_config()).block_size, 4);
  EXPECT_EQ(load_named("x-b8-b16", sdar_4b_config()).block_size, 4);  // two block sizes: neither
  EXPECT_EQ(load_named("x-b0", sdar_4b_config()).block_size, 4);

  const ModelConfig stated = load_named("SDAR-4B-Chat-b64-own", with(sdar_4b_config(), "block_size", 16));
  EXPECT_EQ(stated.block_size, 16);  // config.json wins over the name
  EXPECT_EQ(stated.block_size_source, "config.json");
  // LLaDA names its block length nowhere in its checkpoints' names: no guess from one.
  const ModelConfig llada = load_named("LLaDA-8B-b64", llada_8b_config());
  EXPECT_EQ(llada.block_size, 32);
  EXPECT_FALSE(llada.trained_block_size);
}

TEST(ModelConfig, TakesStopTokensFromGenerationConfig) {
  const ModelConfig c = load(sdar_8b_config(), Json{{"eos_token_id", {151645, 151643}}, {"top_k", 20}});
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
}

TEST(ModelConfig, ReadsSdar30bMoe) {
  const ModelConfig c = load(sdar_30b_moe_config());
  EXPECT_EQ(c.family, ModelFamily::SDAR_MOE);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.experts_per_token, 8);
  EXPECT_EQ(c.moe_intermediate, 768);
  EXPECT_EQ(c.kv_heads, 4);
}

TEST(ModelConfig, HonoursMlpOnlyLayersAndSparseStep) {
  Json config = sdar_30b_moe_config();
  config["mlp_only_layers"] = {0, 5};
  config["decoder_sparse_step"] = 2;
  const ModelConfig c = load(config);
  EXPECT_FALSE(c.is_moe_layer(0));  // listed
  EXPECT_TRUE(c.is_moe_layer(1));   // (1 + 1) % 2 == 0
  EXPECT_FALSE(c.is_moe_layer(2));  // (2 + 1) % 2 != 0
  EXPECT_FALSE(c.is_moe_layer(5));  // listed
}

TEST(ModelConfig, ReadsLlada8b) {
  const ModelConfig c = load(llada_8b_config());
  EXPECT_EQ(c.family, ModelFamily::LLADA);
  EXPECT_EQ(c.hidden, 4096);
  EXPECT_EQ(c.layers, 32);
  EXPECT_EQ(c.heads, 32);
  EXPECT_EQ(c.kv_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate, 12288);
  EXPECT_EQ(c.vocab, 126464);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rms_eps, 1e-5);
  EXPECT_EQ(c.max_positions, 4096);
  EXPECT_EQ(c.mask_token_id, 126336);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{126081, 126348}));
  EXPECT_FALSE(c.bos_token_id.has_value());
}

TEST(ModelConfig, LladaNullKvHeadsMeansHeads) {
  EXPECT_EQ(load(with(llada_8b_config(), "n_kv_heads", nullptr)).kv_heads, 32);
}

TEST(ModelConfig, LladaVocabFallsBackToVocabSize) {
  Json config = without(llada_8b_config(), "embedding_size");
  config["vocab_size"] = 130000;
  EXPECT_EQ(load(config).vocab, 130000);
}

TEST(ModelConfig, LladaDefaultsWithoutOptionalKeys) {
  Json config = without(without(llada_8b_config(), "mask_token_id"), "eos_token_id");
  const ModelConfig c = load(config);
  EXPECT_EQ(c.mask_token_id, 126336);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{126081, 126348}));
}

TEST(ModelConfig, InfersFamilyFromArchitectures) {
  EXPECT_EQ(load(without(llada_8b_config(), "model_type")).family, ModelFamily::LLADA);
  EXPECT_EQ(load(without(sdar_30b_moe_config(), "model_type")).model_type, "sdar_moe");
}

TEST(ModelConfig, RejectsMissingConfigFile) {
  TempDir dir;
  expect_error([&] { load_model_config(dir.path()); }, {dir.path().string(), "has no config.json"});
}

TEST(ModelConfig, RejectsConfigThatIsNotJson) {
  TempDir dir;
  write_file(dir.file("config.json"), "{\"hidden_size\": ");
  expect_error([&] { load_model_config(dir.path()); }, {"config.json", "not valid JSON"});
}

TEST(ModelConfig, RejectsMissingRequiredKey) {
  expect_error([] { load(without(sdar_4b_config(), "hidden_size")); },
               {"config.json", "missing required key 'hidden_size'"});
  expect_error([] { load(without(llada_8b_config(), "n_layers")); },
               {"config.json", "missing required key 'n_layers'"});
}

TEST(ModelConfig, RejectsWrongTypedKey) {
  expect_error([] { load(with(sdar_4b_config(), "num_hidden_layers", "36")); },
               {"config.json", "key 'num_hidden_layers' must be an integer, got string \"36\""});
  expect_error([] { load(with(sdar_4b_config(), "tie_word_embeddings", 0)); },
               {"key 'tie_word_embeddings' must be a boolean, got integer"});
  expect_error([] { load(with(sdar_4b_config(), "rope_theta", "1e6")); }, {"key 'rope_theta' must be a number"});
}

TEST(ModelConfig, RejectsFractionalInteger) {
  expect_error([] { load(with(sdar_4b_config(), "hidden_size", 2560.5)); },
               {"key 'hidden_size' must be an integer, got number"});
}

TEST(ModelConfig, RejectsUnknownModelType) {
  expect_error([] { load(with(sdar_4b_config(), "model_type", "qwen2")); },
               {"config.json", "unsupported model_type 'qwen2'", "supported: sdar, sdar_moe, llada"});
}

TEST(ModelConfig, RejectsUnknownArchitectureWithoutModelType) {
  Json config = without(sdar_4b_config(), "model_type");
  config["architectures"] = {"Qwen2ForCausalLM"};
  expect_error([&] { load(config); }, {"Qwen2ForCausalLM", "supported: sdar, sdar_moe, llada"});
  expect_error([] { load(without(without(sdar_4b_config(), "model_type"), "architectures")); },
               {"missing required key 'model_type'"});
}

TEST(ModelConfig, RejectsAttentionBias) {
  expect_error([] { load(with(sdar_4b_config(), "attention_bias", true)); },
               {"config.json", "attention_bias = true is not supported"});
}

TEST(ModelConfig, SdarHeadDimDefaultsToQwen3s) {
  // Qwen3Config's default, not hidden / heads (which is 80 for SDAR-4B).
  EXPECT_EQ(load(without(sdar_4b_config(), "head_dim")).head_dim, 128);
}

TEST(ModelConfig, DefaultRopeTypeMeansNoScaling) {
  EXPECT_EQ(load(with(sdar_4b_config(), "rope_scaling", {{"rope_type", "default"}})).head_dim, 128);
  EXPECT_EQ(load(with(sdar_4b_config(), "rope_scaling", {{"type", "default"}})).head_dim, 128);
}

TEST(ModelConfig, RejectsSizesPastAnyRealModel) {
  expect_error([] { load(with(sdar_4b_config(), "num_hidden_layers", 30000000)); },
               {"layers 30000000 is past what this engine supports (4096)"});
  expect_error([] { load(with(sdar_30b_moe_config(), "num_experts", 10000000)); },
               {"experts 10000000 is past what this engine supports"});
}

TEST(ModelConfig, StopTokensNameWhereTheyCameFrom) {
  expect_error(
      [] {
        load(sdar_8b_config(), Json{{"eos_token_id", Json::array()}});
      },
      {"generation_config.json: eos_token_id is an empty list"});
  // Neither file names them, and the family's defaults do not fit this vocabulary.
  Json small = with(with(with(sdar_4b_config(), "vocab_size", 1000), "mask_token_id", 5), "bos_token_id", 1);
  expect_error([&] { load(without(small, "eos_token_id")); },
               {"the sdar family's default: eos_token_id 151645 is outside the vocabulary"});
}

TEST(ModelConfig, RejectsRopeScaling) {
  expect_error(
      [] {
        load(with(sdar_4b_config(), "rope_scaling", {{"type", "yarn"}, {"factor", 4}}));
      },
      {"rope_scaling", "is not supported (only null)"});
}

TEST(ModelConfig, RejectsUnsupportedLladaFeature) {
  expect_error([] { load(with(llada_8b_config(), "include_qkv_bias", true)); }, {"include_qkv_bias = true"});
  expect_error([] { load(with(llada_8b_config(), "block_type", "sequential")); }, {"block_type = \"sequential\""});
}

TEST(ModelConfig, RejectsNonPositiveSize) {
  expect_error([] { load(with(sdar_4b_config(), "num_attention_heads", 0)); },
               {"key 'num_attention_heads' must be positive, got 0"});
  expect_error([] { load(with(sdar_4b_config(), "rms_norm_eps", -1e-6)); }, {"key 'rms_norm_eps' must be positive"});
}

TEST(ModelConfig, RejectsHeadsNotAMultipleOfKvHeads) {
  expect_error([] { load(with(sdar_4b_config(), "num_key_value_heads", 6)); },
               {"32 attention heads are not a multiple of 6 key/value heads"});
}

TEST(ModelConfig, RejectsHiddenNotDivisibleByHeadsWhenHeadDimIsImplicit) {
  expect_error([] { load(with(llada_8b_config(), "n_heads", 30)); }, {"d_model 4096 is not a multiple of n_heads 30"});
}

TEST(ModelConfig, RejectsTopKAboveExperts) {
  expect_error([] { load(with(sdar_30b_moe_config(), "num_experts_per_tok", 129)); },
               {"num_experts_per_tok 129 exceeds num_experts 128"});
}

TEST(ModelConfig, RejectsMlpOnlyLayerOutOfRange) {
  expect_error([] { load(with(sdar_30b_moe_config(), "mlp_only_layers", {48})); },
               {"mlp_only_layers entry 48 is not a layer index [0, 48)"});
}

TEST(ModelConfig, RejectsMaskTokenOutsideTheVocabulary) {
  expect_error([] { load(with(sdar_4b_config(), "mask_token_id", 151936)); },
               {"mask_token_id 151936 is outside the vocabulary [0, 151936)"});
}

TEST(ModelConfig, RejectsBadStopTokensNamingGenerationConfig) {
  expect_error(
      [] {
        load(sdar_4b_config(), Json{{"eos_token_id", {151645, -1}}});
      },
      {"generation_config.json", "eos_token_id -1 is outside the vocabulary"});
  expect_error(
      [] {
        load(sdar_4b_config(), Json{{"eos_token_id", "<|im_end|>"}});
      },
      {"generation_config.json", "key 'eos_token_id' must be an integer or a list of integers, got string"});
}

TEST(ModelConfig, AConfigThatIsADeviceIsRefusedNotRead) {
  // A symlink to /dev/zero as config.json: read_text_file would never reach the end.
  TempDir dir;
  std::filesystem::create_symlink("/dev/zero", dir.file("config.json"));
  try {
    load_model_config(dir.path());
    ADD_FAILURE() << "config.json -> /dev/zero was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json is not a regular file"), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, ReadsFastDllmV2) {
  const ModelConfig c = load(fast_dllm_v2_7b_config());
  EXPECT_EQ(c.family, ModelFamily::FAST_DLLM_V2);
  EXPECT_EQ(c.model_type, "Fast_dLLM_Qwen");
  EXPECT_EQ(c.head_dim, 128);  // hidden / heads: Qwen2 configs have no head_dim
  EXPECT_EQ(c.kv_heads, 4);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.shifted_logits);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.block_causal);
  EXPECT_EQ(c.block_size, 32);
  EXPECT_EQ(c.trained_block_size, 32);
  EXPECT_EQ(c.mask_token_id, 151665);  // the generation code's, absent from config.json
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645}));
  EXPECT_EQ(load(with(fast_dllm_v2_7b_config(), "bd_size", 8)).block_size, 8);
  // Without model_type, the architectures entry names the family.
  EXPECT_EQ(load(without(fast_dllm_v2_7b_config(), "model_type")).family, ModelFamily::FAST_DLLM_V2);
  // A null num_key_value_heads means one per query head, as in Qwen2Config.
  EXPECT_EQ(load(with(fast_dllm_v2_7b_config(), "num_key_value_heads", nullptr)).kv_heads, 28);
}

TEST(ModelConfig, ReadsDream) {
  const ModelConfig c = load(dream_7b_config());
  EXPECT_EQ(c.family, ModelFamily::DREAM);
  EXPECT_EQ(c.model_type, "Dream");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.shifted_logits);
  EXPECT_FALSE(c.block_causal);
  EXPECT_EQ(c.mask_token_id, 151666);
  EXPECT_EQ(c.block_size, 32);
  EXPECT_FALSE(c.trained_block_size.has_value());  // Dream trains on whole sequences
  // <|endoftext|> alone: the turn end joins it.
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151643, 151645}));
  EXPECT_EQ(load(without(dream_7b_config(), "model_type")).family, ModelFamily::DREAM);
  EXPECT_EQ(load(with(dream_7b_config(), "head_dim", 128)).head_dim, 128);
}

TEST(ModelConfig, ReadsEfficientDlmByItsArchitecture) {
  // Efficient-DLM keeps Qwen3's model_type; its architectures entry names it.
  Json config = without(without(sdar_4b_config(), "block_size"), "mask_token_id");
  config["model_type"] = "qwen3";
  config["architectures"] = {"EfficientDLM"};
  const ModelConfig c = load(config);
  EXPECT_EQ(c.family, ModelFamily::EFFICIENT_DLM);
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(family_name(c.family), "EfficientDLM");
  EXPECT_TRUE(c.block_causal && c.qk_norm);
  EXPECT_FALSE(c.shifted_logits);
  EXPECT_EQ(c.block_size, 32);
  EXPECT_EQ(c.mask_token_id, 151662);
  EXPECT_EQ(load(with(with(config, "block_size", 64), "mask_token_id", 151669)).block_size, 64);
  // A plain Qwen3 is no diffusion model; an EfficientDLM entry with another model_type is a contradiction.
  expect_error([&] { load(with(config, "architectures", Json::array({"Qwen3ForCausalLM"}))); },
               {"unsupported model_type 'qwen3'", "EfficientDLM"});
  expect_error([&] { load(with(config, "model_type", "sdar")); },
               {"architectures names EfficientDLM, whose model_type is 'qwen3', but model_type is 'sdar'"});
}

TEST(ModelConfig, ReadsEfficientDlmsPublishedKeysAndRefusesTheSwitchesItDoesNotImplement) {
  // nvidia/Efficient-DLM-4B's config.json has its training code's switches beside Qwen3's keys.
  Json config = without(without(sdar_4b_config(), "block_size"), "mask_token_id");
  config["model_type"] = "qwen3";
  config["architectures"] = {"EfficientDLM"};
  for (const auto& [key, value] : std::vector<std::pair<std::string, Json>>{{"adaptive_mask_rate", false},
                                                                            {"attn_implementation", "sdpa"},
                                                                            {"block_size", 32},
                                                                            {"diff_loss_weight", 1},
                                                                            {"disable_qk_norm", false},
                                                                            {"dlm_arch", "encoder"},
                                                                            {"dlm_paradigm", "bidirectional"},
                                                                            {"dlm_type", "llada"},
                                                                            {"enforce_mask", false},
                                                                            {"intl_mask", false},
                                                                            {"mask_token_id", 151662},
                                                                            {"multi_sampling", nullptr},
                                                                            {"num_ar_layers", 0},
                                                                            {"num_diffusion_layers", 0},
                                                                            {"prefix_ratio", 0.8},
                                                                            {"random_length_prob", 0},
                                                                            {"tok_mask_half_life_ratio", nullptr},
                                                                            {"use_cache", false}}) {
    config[key] = value;
  }
  const ModelConfig c = load(config);
  EXPECT_EQ(c.family, ModelFamily::EFFICIENT_DLM);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.block_size, 32);
  expect_error([&] { load(with(config, "disable_qk_norm", true)); }, {"disable_qk_norm = true", "not supported"});
  expect_error([&] { load(with(config, "num_ar_layers", 4)); }, {"num_ar_layers = 4", "not supported"});
  expect_error([&] { load(with(config, "num_diffusion_layers", 8)); }, {"num_diffusion_layers = 8", "not supported"});
}

TEST(ModelConfig, RefusesWhatQwen2FamiliesDoNotImplement) {
  expect_error([] { load(with(fast_dllm_v2_7b_config(), "use_sliding_window", true)); },
               {"use_sliding_window = true", "not supported"});
  expect_error(
      [] {
        load(with(dream_7b_config(), "rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}));
      },
      {"rope_scaling", "not supported"});
  expect_error([] { load(with(dream_7b_config(), "hidden_act", "gelu")); }, {"hidden_act", "not supported"});
  expect_error([] { load(with(dream_7b_config(), "head_dim", 64)); }, {"head_dim 64", "Dream"});
  expect_error([] { load(with(fast_dllm_v2_7b_config(), "num_attention_heads", 27)); },
               {"hidden_size 3584", "not a multiple of num_attention_heads 27"});
}

TEST(ModelConfig, ReadsLlada2Mini) {
  const ModelConfig c = load(llada2_mini_config());
  EXPECT_EQ(c.family, ModelFamily::LLADA2_MOE);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.block_causal);
  EXPECT_FALSE(c.shifted_logits);
  EXPECT_EQ(c.num_experts, 256);
  EXPECT_EQ(c.experts_per_token, 8);
  EXPECT_EQ(c.moe_intermediate, 512);
  EXPECT_EQ(c.shared_expert_intermediate, 512);
  EXPECT_TRUE(c.sigmoid_router);
  EXPECT_TRUE(c.router_bias);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_DOUBLE_EQ(c.routed_scaling, 2.5);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FALSE(c.is_moe_layer(0));  // first_k_dense_replace 1
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_TRUE(c.is_moe_layer(19));
  EXPECT_EQ(c.block_size, 32);
  EXPECT_EQ(c.mask_token_id, 156895);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{156892}));
  EXPECT_EQ(load(without(llada2_mini_config(), "model_type")).family, ModelFamily::LLADA2_MOE);
  EXPECT_EQ(load(with(without(llada2_mini_config(), "rotary_dim"), "partial_rotary_factor", 1.0)).rotary_dim, 0);
}

TEST(ModelConfig, RefusesWhatLlada2DoesNotImplement) {
  expect_error([] { load(with(llada2_mini_config(), "score_function", "softmax")); },
               {"score_function", "not supported"});
  expect_error([] { load(with(llada2_mini_config(), "use_qkv_bias", true)); }, {"use_qkv_bias = true"});
  expect_error([] { load(with(llada2_mini_config(), "using_split_qkv_in_self_attention", true)); },
               {"using_split_qkv_in_self_attention"});
  expect_error([] { load(with(llada2_mini_config(), "rotary_dim", 32)); }, {"rotary_dim 32", "= 64"});
  expect_error([] { load(with(llada2_mini_config(), "n_group", 7)); }, {"not a multiple of n_group 7"});
  expect_error([] { load(with(llada2_mini_config(), "topk_group", 9)); }, {"topk_group 9 exceeds n_group 8"});
  expect_error([] { load(with(with(llada2_mini_config(), "topk_group", 1), "num_experts_per_tok", 33)); },
               {"num_experts_per_tok 33 exceeds the 32 experts"});
  expect_error([] { load(with(llada2_mini_config(), "partial_rotary_factor", 0.01)); }, {"partial_rotary_factor"});
  expect_error([] { load(with(llada2_mini_config(), "expert_capacity", 48)); },
               {"expert_capacity is set: LLaDA2.2's block routing is not supported yet"});
}
