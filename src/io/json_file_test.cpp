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

}  // namespace
}  // namespace lockstep
