#include "io/json_file.h"

#include <gtest/gtest.h>

#include <optional>

#include "io/temp_dir.h"

namespace lockstep {
namespace {

class JsonFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Expected<TempDir> made = TempDir::create("json_file_test");
    ASSERT_TRUE(made.ok()) << made.error().message;
    dir_.emplace(std::move(made).value());
  }
  std::optional<TempDir> dir_;
};

TEST_F(JsonFileTest, ReadsConfigWithFloatObjects) {
  auto path = dir_->write_file(
      "config.json", R"({"hidden_size": 128, "max": {"__float__": "Infinity"}, "list": [1, 2]})");
  ASSERT_TRUE(path.ok());
  auto json = read_json_file(*path);
  ASSERT_TRUE(json.ok()) << json.error().message;
  EXPECT_EQ((*json)["hidden_size"], 128);
  EXPECT_EQ((*json)["max"]["__float__"], "Infinity");
}

TEST_F(JsonFileTest, MissingFileNamesIt) {
  std::string path = dir_->file("absent.json");
  auto json = read_json_file(path);
  ASSERT_FALSE(json.ok());
  EXPECT_NE(json.error().message.find(path), std::string::npos);
}

TEST_F(JsonFileTest, FolderIsAnError) {
  auto json = read_json_file(dir_->path());
  ASSERT_FALSE(json.ok());
  EXPECT_NE(json.error().message.find(dir_->path()), std::string::npos);
}

TEST_F(JsonFileTest, ParseErrorCarriesParserMessage) {
  auto path = dir_->write_file("bad.json", "{\"a\": 1,\n \"b\": }");
  ASSERT_TRUE(path.ok());
  auto json = read_json_file(*path);
  ASSERT_FALSE(json.ok());
  const std::string& message = json.error().message;
  EXPECT_NE(message.find(*path), std::string::npos) << message;
  EXPECT_NE(message.find("line 2"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST_F(JsonFileTest, RealConfigLoads) {
  auto json = read_json_file(std::string(LOCKSTEP_TEST_DATA) + "/llama/config.json");
  ASSERT_TRUE(json.ok()) << json.error().message;
  EXPECT_EQ((*json)["model_type"], "llama");
}

TEST(JsonDepth, CountsNestingWithoutRecursion) {
  EXPECT_EQ(json_depth(nlohmann::json(3)), 0);
  EXPECT_EQ(json_depth(nlohmann::json::array()), 1);
  EXPECT_EQ(json_depth(nlohmann::json::parse(R"({"a": [1, {"b": [[]]}], "c": {}})")), 5);
  // A million levels: parsed (nlohmann's parser keeps its own stack) and measured, no overflow.
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  nlohmann::json value = nlohmann::json::parse(deep);
  EXPECT_EQ(json_depth(value), 1000000);
  EXPECT_EQ(json_depth(nlohmann::ordered_json::parse("[[[]]]")), 3);
}

TEST(JsonTextCheck, FindsDuplicateKeysAndOverDeepTextWithoutATree) {
  EXPECT_TRUE(check_json_text(R"({"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]})").valid);
  const JsonTextCheck twice = check_json_text(R"({"max_tokens": 1, "n": 2, "max_tokens": 7})");
  EXPECT_FALSE(twice.valid);
  EXPECT_EQ(twice.duplicate, "max_tokens");
  EXPECT_EQ(check_json_text(R"({"m": [{"role": "user", "role": "system"}]})").duplicate, "role");
  const JsonTextCheck empty_twice = check_json_text(R"({"k": {"": 1, "": 2}})");
  EXPECT_TRUE(empty_twice.has_duplicate && !empty_twice.valid);
  EXPECT_FALSE(check_json_text(R"({"a": 1,})").valid);
  EXPECT_TRUE(check_json_text(R"({"a": 1,})").duplicate.empty());
  EXPECT_FALSE(check_json_text("").valid);
  // The limit itself passes; one level more is too deep, found without building a tree.
  const auto nested = [](int64_t levels) { return std::string(size_t(levels), '[') + std::string(size_t(levels), ']'); };
  EXPECT_TRUE(check_json_text(nested(kMaxJsonDepth)).valid);
  const JsonTextCheck deep = check_json_text(nested(1000000));
  EXPECT_FALSE(deep.valid);
  EXPECT_TRUE(deep.too_deep);
}

}  // namespace
}  // namespace lockstep
