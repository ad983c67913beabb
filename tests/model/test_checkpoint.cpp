// Checkpoint: single-file, sharded (index) and globbed layouts, and every inconsistency of an
// index or a set of shards.
#include <gtest/gtest.h>

#include <cstring>

#include "model/checkpoint.h"
#include "model_test_util.h"

using namespace jet;
using namespace jet::test;

namespace {

RawTensor f32_tensor(const std::string& name, int64_t n) { return {name, "F32", {n}, std::string(4 * n, '\0')}; }

// A directory with shard files a.safetensors (tensors x, y) and b.safetensors (tensor z).
void write_two_shards(const TempDir& dir) {
  write_file(dir.file("a.safetensors"), safetensors_image({f32_tensor("x", 2), f32_tensor("y", 3)}));
  write_file(dir.file("b.safetensors"), safetensors_image({f32_tensor("z", 4)}));
}

Json index_of(const Json& weight_map) { return {{"metadata", {{"total_size", 36}}}, {"weight_map", weight_map}}; }

}  // namespace

TEST(Checkpoint, LoadsSingleFileTinyModel) {
  TempDir dir;
  ASSERT_TRUE(make_tiny_model("sdar", dir.path()));
  Checkpoint ckpt(dir.path());
  EXPECT_EQ(ckpt.shard_count(), 1u);
  EXPECT_EQ(ckpt.dominant_dtype(), DType::BF16);
  const TensorInfo& q = ckpt.get("model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{64, 64}));  // 4 heads x 16
  EXPECT_EQ(q.dtype, DType::BF16);
  EXPECT_EQ(ckpt.names().size(), 25u);  // embed + 2 layers x 11 + norm + lm_head
  expect_error([&] { ckpt.get("model.layers.2.self_attn.q_proj.weight"); },
               {"no tensor named 'model.layers.2.self_attn.q_proj.weight'"});
}

TEST(Checkpoint, ShardedIndexGivesTheSameTensorsAsOneFile) {
  TempDir single, sharded;
  ASSERT_TRUE(make_tiny_model("sdar_moe", single.path(), 7, "--dtype f16"));
  ASSERT_TRUE(make_tiny_model("sdar_moe", sharded.path(), 7, "--dtype f16 --shards 3"));
  Checkpoint one(single.path()), three(sharded.path());
  EXPECT_EQ(three.shard_count(), 3u);
  EXPECT_EQ(three.dominant_dtype(), DType::F16);
  ASSERT_EQ(one.names(), three.names());
  EXPECT_EQ(one.parameter_count(), three.parameter_count());
  for (const std::string& name : one.names()) {
    const TensorInfo& a = one.get(name);
    const TensorInfo& b = three.get(name);
    ASSERT_EQ(a.shape, b.shape) << name;
    ASSERT_EQ(a.nbytes, b.nbytes) << name;
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << name;
  }
}

TEST(Checkpoint, CountsParametersAndFindsTheDominantDtype) {
  TempDir dir;
  write_file(dir.file("model.safetensors"),
             safetensors_image({f32_tensor("small", 3), {"big", "BF16", {5}, std::string(10, '\0')}}));
  Checkpoint ckpt(dir.path());
  EXPECT_EQ(ckpt.parameter_count(), 8);
  EXPECT_EQ(ckpt.dominant_dtype(), DType::BF16);
}

TEST(Checkpoint, FallsBackToEverySafetensorsFileInTheDirectory) {
  TempDir dir;
  write_two_shards(dir);
  Checkpoint ckpt(dir.path());
  EXPECT_EQ(ckpt.shard_count(), 2u);
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(ckpt.parameter_count(), 9);
}

TEST(Checkpoint, PrefersModelSafetensorsOverOtherFiles) {
  TempDir dir;
  write_two_shards(dir);
  write_file(dir.file("model.safetensors"), safetensors_image({f32_tensor("w", 1)}));
  EXPECT_EQ(Checkpoint(dir.path()).names(), std::vector<std::string>{"w"});
}

TEST(Checkpoint, RejectsDirectoryWithoutSafetensors) {
  TempDir dir;
  write_file(dir.file("config.json"), "{}");
  expect_error([&] { Checkpoint ckpt(dir.path()); },
               {dir.path().string(), "no model.safetensors.index.json, model.safetensors or other *.safetensors"});
}

TEST(Checkpoint, RejectsAnIndexThatListsNoTensors) {
  TempDir dir;
  write_file(dir.file("model.safetensors.index.json"), R"({"weight_map": {}})");
  expect_error([&] { Checkpoint ckpt(dir.path()); }, {"model.safetensors.index.json lists no tensors"});
}

TEST(Checkpoint, RejectsMissingDirectory) {
  expect_error([] { Checkpoint ckpt("/nonexistent/model"); }, {"/nonexistent/model", "not a directory"});
}

TEST(Checkpoint, RejectsIndexNamingAMissingShard) {
  TempDir dir;
  write_two_shards(dir);
  write_json(dir.file("model.safetensors.index.json"),
             index_of({{"x", "a.safetensors"}, {"y", "a.safetensors"}, {"z", "c.safetensors"}}));
  expect_error([&] { Checkpoint ckpt(dir.path()); },
               {"model.safetensors.index.json", "shard 'c.safetensors'", "tensor 'z'", "does not exist"});
}

TEST(Checkpoint, RejectsIndexListingATensorItsShardLacks) {
  TempDir dir;
  write_two_shards(dir);
  write_json(
      dir.file("model.safetensors.index.json"),
      index_of({{"x", "a.safetensors"}, {"y", "a.safetensors"}, {"z", "b.safetensors"}, {"w", "b.safetensors"}}));
  expect_error([&] { Checkpoint ckpt(dir.path()); },
               {"tensor 'w' is listed in shard 'b.safetensors' but that shard does not contain it"});
}

TEST(Checkpoint, RejectsIndexPointingAtTheWrongShard) {
  TempDir dir;
  write_two_shards(dir);
  write_json(dir.file("model.safetensors.index.json"),
             index_of({{"x", "a.safetensors"}, {"y", "b.safetensors"}, {"z", "b.safetensors"}}));
  expect_error([&] { Checkpoint ckpt(dir.path()); },
               {"tensor 'y' is listed in shard 'b.safetensors' but found in 'a.safetensors'"});
}

TEST(Checkpoint, RejectsShardTensorMissingFromTheIndex) {
  TempDir dir;
  write_two_shards(dir);
  write_json(dir.file("model.safetensors.index.json"), index_of({{"x", "a.safetensors"}, {"z", "b.safetensors"}}));
  expect_error([&] { Checkpoint ckpt(dir.path()); }, {"tensor 'y'", "missing from the index"});
}

TEST(Checkpoint, RejectsTensorInTwoShards) {
  TempDir dir;
  write_two_shards(dir);
  write_file(dir.file("c.safetensors"), safetensors_image({f32_tensor("y", 3)}));
  expect_error([&] { Checkpoint ckpt(dir.path()); }, {"tensor 'y' is in two shards", "a.safetensors", "c.safetensors"});
}

TEST(Checkpoint, RejectsIndexWithoutWeightMap) {
  TempDir dir;
  write_two_shards(dir);
  write_json(dir.file("model.safetensors.index.json"), {{"metadata", Json::object()}});
  expect_error([&] { Checkpoint ckpt(dir.path()); }, {"model.safetensors.index.json", "'weight_map'"});
}

TEST(Checkpoint, RejectsIndexEntryThatIsNotAFileName) {
  TempDir dir;
  write_two_shards(dir);
  write_json(dir.file("model.safetensors.index.json"), index_of({{"x", "../a.safetensors"}}));
  expect_error([&] { Checkpoint ckpt(dir.path()); }, {"'../a.safetensors'", "not a file name"});
}

TEST(Checkpoint, RejectsIndexThatIsNotJson) {
  TempDir dir;
  write_two_shards(dir);
  write_file(dir.file("model.safetensors.index.json"), "{\"weight_map\": ");
  expect_error([&] { Checkpoint ckpt(dir.path()); }, {"model.safetensors.index.json", "not valid JSON"});
}

TEST(Checkpoint, ReportsABrokenShardByPath) {
  TempDir dir;
  write_file(dir.file("model.safetensors"), "tiny");
  expect_error([&] { Checkpoint ckpt(dir.path()); }, {dir.file("model.safetensors"), "too short"});
}
