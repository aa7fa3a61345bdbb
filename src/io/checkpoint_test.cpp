#include "io/checkpoint.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "io/safetensors_writer.h"
#include "io/temp_dir.h"

namespace lockstep {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Expected<TempDir> made = TempDir::create("checkpoint_test");
    ASSERT_TRUE(made.ok()) << made.error().message;
    dir_.emplace(std::move(made).value());
  }
  // Writes f32 tensors of shape [2, 2] named `names` to `file` in the folder.
  void write_shard(const std::string& file, const std::vector<std::string>& names) {
    std::vector<TensorToWrite> tensors;
    for (const std::string& name : names) tensors.push_back({name, DType::f32, {2, 2}, values_});
    ASSERT_TRUE(write_safetensors(dir_->file(file), tensors).ok());
  }
  void write_index(const std::string& json) {
    ASSERT_TRUE(dir_->write_file("model.safetensors.index.json", json).ok());
  }
  // Opens the folder, expecting failure, and returns the message.
  std::string open_error() {
    auto checkpoint = Checkpoint::open(dir_->path());
    EXPECT_FALSE(checkpoint.ok());
    return checkpoint.ok() ? "" : checkpoint.error().message;
  }
  // Two shards and an index mapping a.weight, b.weight to the first and c.weight to the second.
  void write_sharded() {
    write_shard("model-00001-of-00002.safetensors", {"a.weight", "b.weight"});
    write_shard("model-00002-of-00002.safetensors", {"c.weight"});
    write_index(R"({"metadata": {"total_size": 48}, "weight_map": {
        "a.weight": "model-00001-of-00002.safetensors",
        "b.weight": "model-00001-of-00002.safetensors",
        "c.weight": "model-00002-of-00002.safetensors"}})");
  }

  std::optional<TempDir> dir_;
  float values_[4] = {1, 2, 3, 4};
};

TEST_F(CheckpointTest, SingleFile) {
  write_shard("model.safetensors", {"x.weight", "y.weight"});
  auto checkpoint = Checkpoint::open(dir_->path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.error().message;
  const Checkpoint& weights = **checkpoint;
  EXPECT_TRUE(weights.has("x.weight"));
  EXPECT_FALSE(weights.has("z.weight"));
  EXPECT_EQ(weights.names(), (std::vector<std::string>{"x.weight", "y.weight"}));
  auto x = weights.get("x.weight", {2, 2});
  ASSERT_TRUE(x.ok()) << x.error().message;
  EXPECT_EQ(x->file, dir_->file("model.safetensors"));
  EXPECT_EQ(std::memcmp(x->data, values_, sizeof values_), 0);
}

TEST_F(CheckpointTest, MissingTensorNamesTensorAndFile) {
  write_shard("model.safetensors", {"x.weight"});
  auto checkpoint = Checkpoint::open(dir_->path());
  ASSERT_TRUE(checkpoint.ok());
  auto found = (*checkpoint)->find("nope");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.error().message, "missing tensor 'nope' in " + dir_->file("model.safetensors"));
  EXPECT_FALSE((*checkpoint)->get("nope", {2, 2}).ok());
}

TEST_F(CheckpointTest, GetShapeMismatchNamesEverything) {
  write_shard("model.safetensors", {"x.weight"});
  auto checkpoint = Checkpoint::open(dir_->path());
  ASSERT_TRUE(checkpoint.ok());
  auto got = (*checkpoint)->get("x.weight", {4, 2});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message, dir_->file("model.safetensors") +
                                     ": tensor 'x.weight' has shape [2, 2], expected [4, 2]");
  EXPECT_FALSE((*checkpoint)->get("x.weight", {4}).ok());
}

TEST_F(CheckpointTest, GetRejectsIntegerTensor) {
  int32_t ids[2] = {1, 2};
  ASSERT_TRUE(
      write_safetensors(dir_->file("model.safetensors"), {{"ids", DType::i32, {2}, ids}}).ok());
  auto checkpoint = Checkpoint::open(dir_->path());
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_TRUE((*checkpoint)->find("ids").ok());
  auto got = (*checkpoint)->get("ids", {2});
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(contains(got.error().message, "'ids' has dtype i32")) << got.error().message;
}

TEST_F(CheckpointTest, MissingFolder) {
  std::string missing = dir_->file("nothing_here");
  auto checkpoint = Checkpoint::open(missing);
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_TRUE(contains(checkpoint.error().message, missing)) << checkpoint.error().message;
}

TEST_F(CheckpointTest, FileInsteadOfFolder) {
  write_shard("model.safetensors", {"x"});
  auto checkpoint = Checkpoint::open(dir_->file("model.safetensors"));
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_TRUE(contains(checkpoint.error().message, "not a folder"));
}

TEST_F(CheckpointTest, FolderWithoutWeights) {
  std::string message = open_error();
  EXPECT_TRUE(contains(message, dir_->path())) << message;
  EXPECT_TRUE(contains(message, "model.safetensors.index.json")) << message;
}

TEST_F(CheckpointTest, CorruptSingleFileNamesIt) {
  ASSERT_TRUE(dir_->write_file("model.safetensors", "garbage").ok());
  EXPECT_TRUE(contains(open_error(), dir_->file("model.safetensors")));
}

TEST_F(CheckpointTest, Sharded) {
  write_sharded();
  auto checkpoint = Checkpoint::open(dir_->path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.error().message;
  EXPECT_EQ((*checkpoint)->names(), (std::vector<std::string>{"a.weight", "b.weight", "c.weight"}));
  auto a = (*checkpoint)->get("a.weight", {2, 2});
  auto c = (*checkpoint)->get("c.weight", {2, 2});
  ASSERT_TRUE(a.ok() && c.ok());
  EXPECT_EQ(a->file, dir_->file("model-00001-of-00002.safetensors"));
  EXPECT_EQ(c->file, dir_->file("model-00002-of-00002.safetensors"));
  EXPECT_EQ(std::memcmp(c->data, values_, sizeof values_), 0);
  auto missing = (*checkpoint)->find("d.weight");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message,
            "missing tensor 'd.weight' in " + dir_->file("model.safetensors.index.json"));
}

TEST_F(CheckpointTest, SingleFileWinsOverIndex) {
  write_sharded();
  write_shard("model.safetensors", {"only.weight"});
  auto checkpoint = Checkpoint::open(dir_->path());
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_EQ((*checkpoint)->names(), std::vector<std::string>{"only.weight"});
}

TEST_F(CheckpointTest, IndexNotJson) {
  write_index("{\"weight_map\": ");
  std::string message = open_error();
  EXPECT_TRUE(contains(message, dir_->file("model.safetensors.index.json"))) << message;
  EXPECT_TRUE(contains(message, "parse error")) << message;
}

TEST_F(CheckpointTest, IndexWithoutWeightMap) {
  for (const char* json :
       {R"({"metadata": {}})", R"({"weight_map": []})", "[]", R"({"weight_map": {}})"}) {
    SCOPED_TRACE(json);
    write_index(json);
    std::string message = open_error();
    EXPECT_TRUE(contains(message, dir_->file("model.safetensors.index.json"))) << message;
    EXPECT_TRUE(contains(message, "weight_map")) << message;
  }
}

TEST_F(CheckpointTest, IndexEntryNotAString) {
  write_index(R"({"weight_map": {"a.weight": 3}})");
  std::string message = open_error();
  EXPECT_TRUE(contains(message, "'a.weight'")) << message;
}

TEST_F(CheckpointTest, IndexNamesMissingShard) {
  write_sharded();
  ASSERT_EQ(std::remove(dir_->file("model-00002-of-00002.safetensors").c_str()), 0);
  std::string message = open_error();
  EXPECT_TRUE(contains(message, dir_->file("model-00002-of-00002.safetensors"))) << message;
  EXPECT_TRUE(contains(message, "model.safetensors.index.json")) << message;
}

TEST_F(CheckpointTest, IndexNamesCorruptShard) {
  write_sharded();
  ASSERT_TRUE(dir_->write_file("model-00001-of-00002.safetensors", "12345678{}").ok());
  std::string message = open_error();
  EXPECT_TRUE(contains(message, dir_->file("model-00001-of-00002.safetensors"))) << message;
}

TEST_F(CheckpointTest, IndexMapsTensorToShardWithoutIt) {
  write_sharded();
  write_shard("model-00002-of-00002.safetensors", {"other.weight"});
  std::string message = open_error();
  EXPECT_TRUE(contains(message, "'c.weight'")) << message;
  EXPECT_TRUE(contains(message, dir_->file("model-00002-of-00002.safetensors"))) << message;
  EXPECT_TRUE(contains(message, "does not contain it")) << message;
}

TEST_F(CheckpointTest, IndexShardOutsideFolder) {
  write_index(R"({"weight_map": {"a.weight": "../model.safetensors"}})");
  EXPECT_TRUE(contains(open_error(), "not a file inside the folder"));
  write_index(R"({"weight_map": {"a.weight": "/etc/passwd"}})");
  EXPECT_TRUE(contains(open_error(), "not a file inside the folder"));
}

TEST_F(CheckpointTest, RealFixtureLoads) {
  auto checkpoint = Checkpoint::open(std::string(LOCKSTEP_TEST_DATA) + "/llama");
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.error().message;
  auto embed = (*checkpoint)->get("model.embed_tokens.weight", {512, 128});
  ASSERT_TRUE(embed.ok()) << embed.error().message;
  EXPECT_EQ(embed->dtype, DType::f32);
  EXPECT_EQ(embed->bytes, 512u * 128u * 4u);
}

TEST(MemoryWeightsTest, AddFindGet) {
  MemoryWeights weights;
  std::vector<uint8_t> bytes(2 * 3 * 2, 0x11);
  weights.add("w", DType::bf16, {2, 3}, bytes);
  EXPECT_TRUE(weights.has("w"));
  EXPECT_FALSE(weights.has("v"));
  EXPECT_EQ(weights.names(), std::vector<std::string>{"w"});
  auto w = weights.get("w", {2, 3});
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->dtype, DType::bf16);
  EXPECT_EQ(w->bytes, bytes.size());
  EXPECT_EQ(std::memcmp(w->data, bytes.data(), bytes.size()), 0);
  EXPECT_EQ(weights.find("v").error().message, "missing tensor 'v' in memory weights");
  auto wrong = weights.get("w", {3, 2});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().message, "memory weights: tensor 'w' has shape [2, 3], expected [3, 2]");
}

}  // namespace
}  // namespace lockstep
