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

INSTANTIATE_TEST_SUITE_P(Families, CliBatch, ::testing::Values("llama", "nemotron_h_moe"));

}  // namespace
}  // namespace lockstep
