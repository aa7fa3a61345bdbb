// lockstep generate --batch: every line through one lane host, each reply equal to the same
// prompt generated alone, bad lines reported without losing the good ones.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/temp_dir.h"
#include "run_command.h"
#include "test_support.h"

namespace lockstep {
namespace {

CommandResult run_lockstep(const std::vector<std::string>& args) {
  auto result = run_command(lockstep_binary(), args);
  EXPECT_TRUE(result.ok());
  return result.ok() ? *result : CommandResult{};
}

std::vector<int32_t> ids_of_line(const std::string& line) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at < line.size()) {
    size_t next = line.find(' ', at);
    if (next == std::string::npos) next = line.size();
    if (next > at) ids.push_back(std::stoi(line.substr(at, next - at)));
    at = next + 1;
  }
  return ids;
}

class CliBatch : public ::testing::TestWithParam<std::string> {};

TEST_P(CliBatch, EveryLineEqualsItsAloneRun) {
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  std::vector<nlohmann::json> lines;
  for (int i = 0; i < 10; ++i) {
    nlohmann::json line = {{"tokens", std::vector<int>{}}, {"max_tokens", 3 + i % 4}};
    for (int t = 0; t < 1 + i * 29; ++t) line["tokens"].push_back((t * 37 + i) % 500);
    if (i % 2) {
      line["temperature"] = 0.9;
      line["seed"] = 100 + i;
    }
    lines.push_back(line);
  }
  std::string text;
  for (const auto& line : lines) text += line.dump() + "\n";
  text += "{\"tokens\": [1, 99999]}\n";
  auto path = dir->write_file("batch.jsonl", text);
  ASSERT_TRUE(path.ok());
  CommandResult batch = run_lockstep({"generate", "--model", test_data(GetParam()), "--batch", *path, "--parallel",
                                      "4", "--chunk", "64", "--ignore-eos", "--threads", "1"});
  EXPECT_EQ(batch.exit_code, 1) << "one line is bad";
  std::vector<std::string> out = split_lines(batch.out);
  ASSERT_EQ(out.size(), lines.size() + 1) << batch.err;
  for (size_t i = 0; i < lines.size(); ++i) {
    nlohmann::json reply = nlohmann::json::parse(out[i]);
    ASSERT_EQ(reply["index"], i);
    std::vector<std::string> args = {"generate", "--model", test_data(GetParam()), "--chunk", "64", "--ignore-eos",
                                     "--threads", "1", "--max-tokens", std::to_string(lines[i]["max_tokens"].get<int>())};
    std::string tokens;
    for (const auto& id : lines[i]["tokens"]) tokens += (tokens.empty() ? "" : ",") + std::to_string(id.get<int>());
    args.insert(args.end(), {"--tokens", tokens});
    if (lines[i].contains("seed"))
      args.insert(args.end(), {"--temperature", "0.9", "--seed", std::to_string(lines[i]["seed"].get<int>())});
    CommandResult alone = run_lockstep(args);
    ASSERT_EQ(alone.exit_code, 0) << alone.err;
    EXPECT_EQ(reply["ids"].get<std::vector<int32_t>>(), ids_of_line(split_lines(alone.out).at(0))) << "line " << i;
    EXPECT_EQ(reply["finish_reason"], "length");
  }
  nlohmann::json bad = nlohmann::json::parse(out.back());
  EXPECT_NE(bad["error"].get<std::string>().find("99999"), std::string::npos);
}

// A line's fields are checked by name: an unknown key, a seed that is no integer of 64 bits
// and a wrongly typed value are that line's error; ignore_eos is a line's own setting.
TEST(CliBatchLines, FieldsAreCheckedByName) {
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"tokens": [1, 2], "max_token": 3})", "\"max_token\" is not a field a batch line takes"},
      {R"({"tokens": [1, 2], "seed": -5, "temperature": 1})", "\"seed\" must be an integer from 0 to"},
      {R"({"tokens": [1, 2], "seed": 1.5})", "\"seed\" must be an integer"},
      {R"({"tokens": [1, 2], "temperature": "hot"})", "\"temperature\" must be a number"},
      {R"({"tokens": [1, 2], "ignore_eos": 1})", "\"ignore_eos\" must be true or false"},
      {R"({"prompt": 5})", "\"prompt\" must be a string"}};
  std::string text = R"({"tokens": [1, 2, 3], "max_tokens": 6, "ignore_eos": true})" "\n";
  for (const auto& [line, _] : bad) text += line + "\n";
  auto path = dir->write_file("batch.jsonl", text);
  ASSERT_TRUE(path.ok());
  CommandResult batch = run_lockstep({"generate", "--model", test_data("llama"), "--batch", *path, "--threads", "1"});
  EXPECT_EQ(batch.exit_code, 1);
  std::vector<std::string> out = split_lines(batch.out);
  ASSERT_EQ(out.size(), bad.size() + 1) << batch.err;
  nlohmann::json good = nlohmann::json::parse(out[0]);
  EXPECT_EQ(good["ids"].size(), 6u) << good;
  EXPECT_EQ(good["finish_reason"], "length");
  for (size_t i = 0; i < bad.size(); ++i) {
    nlohmann::json reply = nlohmann::json::parse(out[i + 1]);
    ASSERT_TRUE(reply.contains("error")) << reply;
    EXPECT_NE(reply["error"].get<std::string>().find(bad[i].second), std::string::npos) << reply;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CliBatch, ::testing::Values("llama", "nemotron_h_moe"));

}  // namespace
}  // namespace lockstep
