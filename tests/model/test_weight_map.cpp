// Weight maps: names and shapes per family (checked against the parameter counts of the real
// checkpoints), validation of tiny models, and each kind of mismatch.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "model/weight_map.h"
#include "model_test_util.h"
#include "real_configs.h"

using namespace jet;
using namespace jet::test;

namespace {

ModelConfig load(const Json& config) { return config_from_json(config); }

int64_t parameter_count(const std::vector<ExpectedTensor>& tensors) {
  int64_t total = 0;
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    total += n;
  }
  return total;
}

// A tiny model of `arch` whose model.safetensors has been rewritten by `edit`.
struct EditedModel {
  TempDir dir;
  ModelConfig config;
};

void make_edited(EditedModel& m, const std::string& arch, const std::string& extra,
                 const std::function<void(std::vector<RawTensor>&)>& edit) {
  ASSERT_TRUE(make_tiny_model(arch, m.dir.path(), 3, extra));
  std::vector<RawTensor> tensors = read_raw_tensors(m.dir.file("model.safetensors"));
  edit(tensors);
  write_file(m.dir.file("model.safetensors"), safetensors_image(tensors));
  m.config = load_model_config(m.dir.path());
}

std::vector<int64_t> shape_of(const std::vector<ExpectedTensor>& tensors, const std::string& name) {
  auto it = std::find_if(tensors.begin(), tensors.end(), [&](const ExpectedTensor& t) { return t.name == name; });
  JET_ASSERT(it != tensors.end(), "expected tensor missing: ", name);
  return it->shape;
}

RawTensor& find(std::vector<RawTensor>& tensors, const std::string& name) {
  auto it = std::find_if(tensors.begin(), tensors.end(), [&](const RawTensor& t) { return t.name == name; });
  JET_ASSERT(it != tensors.end(), "test tensor missing");
  return *it;
}

}  // namespace

TEST(WeightMap, ExpectedTensorsMatchTheRealCheckpointSizes) {
  // Parameter counts = total_size / 2 of each bf16 checkpoint's index (reference/models.md).
  const auto sdar4b = expected_tensors(load(sdar_4b_config()));
  EXPECT_EQ(sdar4b.size(), 399u);
  EXPECT_EQ(parameter_count(sdar4b), 4411424256);
  EXPECT_EQ(parameter_count(expected_tensors(load(sdar_8b_config()))), 8190735360);
  const auto moe = expected_tensors(load(sdar_30b_moe_config()));
  EXPECT_EQ(moe.size(), 18867u);
  EXPECT_EQ(parameter_count(moe), 30532122624);
  const auto llada = expected_tensors(load(llada_8b_config()));
  EXPECT_EQ(llada.size(), 291u);
  EXPECT_EQ(parameter_count(llada), 8015581184);
  // Qwen2.5-7B's 7,615,616,512 parameters, the q/k/v biases included.
  for (const Json& qwen2 : {fast_dllm_v2_7b_config(), dream_7b_config()}) {
    const auto tensors = expected_tensors(load(qwen2));
    EXPECT_EQ(tensors.size(), 28u * 12 + 3);  // a layer: q, k, v and their biases, o, 2 norms, 3 MLP
    EXPECT_EQ(parameter_count(tensors), 7615616512);
  }
}

TEST(WeightMap, Llada2MiniNamesAndTheCheckpointsTensorCount) {
  const ModelConfig c = load(llada2_mini_config());
  const auto tensors = expected_tensors(c);
  EXPECT_EQ(tensors.size(), 14813u);  // LLaDA2.0-mini's checkpoint index (peers.md)
  const LayerWeightNames dense = layer_weight_names(c, 0), moe = layer_weight_names(c, 1);
  EXPECT_EQ(dense.q_proj, "model.layers.0.attention.query_key_value.weight");
  EXPECT_TRUE(dense.k_proj.empty());
  EXPECT_EQ(dense.gate_proj, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_TRUE(dense.router.empty());
  EXPECT_EQ(moe.router_bias, "model.layers.1.mlp.gate.expert_bias");
  EXPECT_EQ(moe.shared_down, "model.layers.1.mlp.shared_experts.down_proj.weight");
  EXPECT_EQ(expert_weight_names(c, 1, 255).up_proj, "model.layers.1.mlp.experts.255.up_proj.weight");
  EXPECT_EQ(shape_of(tensors, dense.q_proj), (std::vector<int64_t>{(16 + 2 * 4) * 128, 2048}));
  EXPECT_EQ(shape_of(tensors, moe.router_bias), (std::vector<int64_t>{256}));
  EXPECT_EQ(shape_of(tensors, moe.shared_gate), (std::vector<int64_t>{512, 2048}));
  EXPECT_EQ(model_weight_names(c).embed, "model.word_embeddings.weight");
}

TEST(WeightMap, Qwen2NamesHaveBiasesAndNoQkNorm) {
  const ModelConfig c = load(fast_dllm_v2_7b_config());
  const LayerWeightNames n = layer_weight_names(c, 2);
  EXPECT_EQ(n.q_proj, "model.layers.2.self_attn.q_proj.weight");
  EXPECT_EQ(n.q_bias, "model.layers.2.self_attn.q_proj.bias");
  EXPECT_EQ(n.k_bias, "model.layers.2.self_attn.k_proj.bias");
  EXPECT_EQ(n.v_bias, "model.layers.2.self_attn.v_proj.bias");
  EXPECT_TRUE(n.q_norm.empty());
  EXPECT_TRUE(n.k_norm.empty());
  EXPECT_TRUE(layer_weight_names(load(sdar_4b_config()), 2).q_bias.empty());
  const auto tensors = expected_tensors(c);
  EXPECT_EQ(shape_of(tensors, n.q_bias), (std::vector<int64_t>{3584}));
  EXPECT_EQ(shape_of(tensors, n.v_bias), (std::vector<int64_t>{512}));
}

TEST(WeightMap, SdarNamesAndShapes) {
  const ModelConfig c = load(sdar_4b_config());
  const LayerWeightNames n = layer_weight_names(c, 7);
  EXPECT_EQ(n.attn_norm, "model.layers.7.input_layernorm.weight");
  EXPECT_EQ(n.q_proj, "model.layers.7.self_attn.q_proj.weight");
  EXPECT_EQ(n.q_norm, "model.layers.7.self_attn.q_norm.weight");
  EXPECT_EQ(n.mlp_norm, "model.layers.7.post_attention_layernorm.weight");
  EXPECT_EQ(n.down_proj, "model.layers.7.mlp.down_proj.weight");
  EXPECT_TRUE(n.router.empty());
  const ModelWeightNames g = model_weight_names(c);
  EXPECT_EQ(g.embed, "model.embed_tokens.weight");
  EXPECT_EQ(g.final_norm, "model.norm.weight");
  EXPECT_EQ(g.lm_head, "lm_head.weight");
  const auto tensors = expected_tensors(c);
  EXPECT_EQ(shape_of(tensors, n.q_proj), (std::vector<int64_t>{4096, 2560}));
  EXPECT_EQ(shape_of(tensors, n.k_proj), (std::vector<int64_t>{1024, 2560}));
  EXPECT_EQ(shape_of(tensors, n.o_proj), (std::vector<int64_t>{2560, 4096}));
  EXPECT_EQ(shape_of(tensors, n.q_norm), (std::vector<int64_t>{128}));
  EXPECT_EQ(shape_of(tensors, g.lm_head), (std::vector<int64_t>{151936, 2560}));
}

TEST(WeightMap, MoeNamesAndShapes) {
  const ModelConfig c = load(sdar_30b_moe_config());
  const LayerWeightNames n = layer_weight_names(c, 3);
  EXPECT_EQ(n.router, "model.layers.3.mlp.gate.weight");
  EXPECT_TRUE(n.gate_proj.empty());
  const ExpertWeightNames e = expert_weight_names(c, 3, 127);
  EXPECT_EQ(e.gate_proj, "model.layers.3.mlp.experts.127.gate_proj.weight");
  EXPECT_EQ(e.up_proj, "model.layers.3.mlp.experts.127.up_proj.weight");
  EXPECT_EQ(e.down_proj, "model.layers.3.mlp.experts.127.down_proj.weight");
}

TEST(WeightMap, MoeDenseLayersKeepADenseMlp) {
  Json config = sdar_30b_moe_config();
  config["mlp_only_layers"] = {0};
  const ModelConfig c = load(config);
  EXPECT_EQ(layer_weight_names(c, 0).gate_proj, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_TRUE(layer_weight_names(c, 0).router.empty());
  EXPECT_EQ(expected_tensors(c).size(), 18867u - 128 * 3 - 1 + 3);
}

TEST(WeightMap, LladaNames) {
  const ModelConfig c = load(llada_8b_config());
  const LayerWeightNames n = layer_weight_names(c, 0);
  EXPECT_EQ(n.attn_norm, "model.transformer.blocks.0.attn_norm.weight");
  EXPECT_EQ(n.o_proj, "model.transformer.blocks.0.attn_out.weight");
  EXPECT_EQ(n.mlp_norm, "model.transformer.blocks.0.ff_norm.weight");
  EXPECT_EQ(n.gate_proj, "model.transformer.blocks.0.ff_proj.weight");
  EXPECT_EQ(n.up_proj, "model.transformer.blocks.0.up_proj.weight");
  EXPECT_EQ(n.down_proj, "model.transformer.blocks.0.ff_out.weight");
  EXPECT_TRUE(n.q_norm.empty());
  EXPECT_EQ(model_weight_names(c).embed, "model.transformer.wte.weight");
  EXPECT_EQ(model_weight_names(c).final_norm, "model.transformer.ln_f.weight");
  EXPECT_EQ(model_weight_names(c).lm_head, "model.transformer.ff_out.weight");
}

TEST(WeightMap, TiedHeadReusesTheEmbedding) {
  Json config = sdar_4b_config();
  config["tie_word_embeddings"] = true;
  const ModelConfig c = load(config);
  EXPECT_EQ(model_weight_names(c).lm_head, "model.embed_tokens.weight");
  EXPECT_EQ(expected_tensors(c).size(), 398u);
  Json llada = llada_8b_config();
  llada["weight_tying"] = true;
  EXPECT_EQ(model_weight_names(load(llada)).lm_head, "model.transformer.wte.weight");
}

TEST(WeightMap, TinyModelsOfEveryFamilyValidate) {
  for (const char* arch : {"sdar", "sdar_moe", "llada"}) {
    TempDir dir;
    ASSERT_TRUE(make_tiny_model(arch, dir.path(), 5, "--shards 2"));
    const ModelConfig config = load_model_config(dir.path());
    const Checkpoint ckpt(dir.path());
    const WeightReport report = validate_weights(config, ckpt);
    EXPECT_TRUE(report.ok()) << arch << ": " << (report.problems.empty() ? "" : report.problems[0]);
    EXPECT_TRUE(report.unexpected.empty()) << arch;
    EXPECT_EQ(ckpt.names().size(), expected_tensors(config).size()) << arch;
    EXPECT_NO_THROW(require_valid_weights(config, ckpt));
  }
}

TEST(WeightMap, ReportsMissingTensor) {
  EditedModel m;
  ASSERT_NO_FATAL_FAILURE(make_edited(m, "sdar", "", [](auto& tensors) {
    tensors.erase(std::find_if(tensors.begin(), tensors.end(),
                               [](const RawTensor& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; }));
  }));
  const WeightReport report = validate_weights(m.config, Checkpoint(m.dir.path()));
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0], "missing tensor 'model.layers.1.mlp.up_proj.weight' (expected shape [128, 64])");
  expect_error([&] { require_valid_weights(m.config, Checkpoint(m.dir.path())); },
               {m.dir.path().string(), "weights do not match config.json (1 problem)", "missing tensor"});
}

TEST(WeightMap, ReportsWrongShape) {
  EditedModel m;
  ASSERT_NO_FATAL_FAILURE(make_edited(m, "llada", "", [](auto& tensors) {
    find(tensors, "model.transformer.blocks.0.q_proj.weight").shape = {32, 128};  // same bytes, wrong shape
  }));
  const WeightReport report = validate_weights(m.config, Checkpoint(m.dir.path()));
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0],
            "tensor 'model.transformer.blocks.0.q_proj.weight' has shape [32, 128], expected [64, 64]");
}

TEST(WeightMap, ReportsNonFloatDtype) {
  EditedModel m;
  ASSERT_NO_FATAL_FAILURE(
      make_edited(m, "sdar", "--dtype f32", [](auto& tensors) { find(tensors, "model.norm.weight").dtype = "I32"; }));
  const WeightReport report = validate_weights(m.config, Checkpoint(m.dir.path()));
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0], "tensor 'model.norm.weight' has dtype I32, expected a float dtype (BF16, F16 or F32)");
}

TEST(WeightMap, ReportsUnexpectedTensorsWithoutFailing) {
  EditedModel m;
  ASSERT_NO_FATAL_FAILURE(make_edited(m, "sdar_moe", "", [](auto& tensors) {
    tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {8}, std::string(32, '\0')});
  }));
  const WeightReport report = validate_weights(m.config, Checkpoint(m.dir.path()));
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.unexpected, std::vector<std::string>{"model.layers.0.self_attn.rotary_emb.inv_freq"});
}

TEST(WeightMap, ConfigOfTheWrongSizeListsTheFirstProblems) {
  EditedModel m;
  ASSERT_NO_FATAL_FAILURE(make_edited(m, "sdar", "--layers 4", [](auto&) {}));
  Json config = read_json(m.dir.file("config.json"));
  config["hidden_size"] = 32;
  write_json(m.dir.file("config.json"), config);
  const ModelConfig wrong = load_model_config(m.dir.path());
  const WeightReport report = validate_weights(wrong, Checkpoint(m.dir.path()));
  EXPECT_EQ(report.problems.size(), 4u * 9 + 3);  // every tensor but the q/k norms (head_dim is explicit)
  expect_error([&] { require_valid_weights(wrong, Checkpoint(m.dir.path())); },
               {"(39 problems)", "expected [", "... and 29 more"});
}
