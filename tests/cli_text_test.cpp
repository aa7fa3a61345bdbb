// lockstep tokenize and render against the Hugging Face references, through the binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/json_file.h"
#include "io/temp_dir.h"
#include "run_command.h"
#include "test_support.h"

namespace lockstep {
namespace {

using nlohmann::json;

std::string tokenizer_dir(const std::string& name) { return test_data("../../third_party/tokenizers/" + name); }

class CliText : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(tokenizer_dir(GetParam()) + "/tokenizer.json"))
      GTEST_SKIP() << "run scripts/fetch-tokenizers first";
  }
};

// encodings.json comes from the tokenizers library, which runs tokenizer.json as written.
TEST_P(CliText, TokenizeJsonOnlyMatchesTheReferenceEncodings) {
  auto encodings = read_json_file(test_data("tokenizers/" + GetParam() + "/encodings.json"));
  ASSERT_TRUE(encodings.ok());
  int checked = 0;
  for (const auto& c : (*encodings)["cases"]) {
    if (checked++ % 10 != 0) continue;  // a sample: the unit tests check every case in process
    auto result = run_command(lockstep_binary(), {"tokenize", "--model", tokenizer_dir(GetParam()), "--text", c["text"],
                                                "--tokenizer-json-only"});
    ASSERT_TRUE(result.ok());
    ASSERT_EQ(result->exit_code, 0) << result->err;
    EXPECT_EQ(json::parse(result->out), c["ids"]) << c["text"];
  }
}

// chat.json comes from transformers, whose tokenizer for the folder lockstep builds by default.
TEST_P(CliText, TokenizeMatchesTheReferenceChatIds) {
  auto chats = read_json_file(test_data("tokenizers/" + GetParam() + "/chat.json"));
  ASSERT_TRUE(chats.ok());
  for (const auto& c : (*chats)["cases"]) {
    auto result = run_command(lockstep_binary(), {"tokenize", "--model", tokenizer_dir(GetParam()), "--text", c["prompt"]});
    ASSERT_TRUE(result.ok());
    ASSERT_EQ(result->exit_code, 0) << result->err;
    EXPECT_EQ(json::parse(result->out), c["ids"]) << c["prompt"];
  }
}

// `lockstep render` of `messages` (written to `name` in `dir`), with --no-thinking where the
// reference case's kwargs turn thinking off.
CommandResult render(const std::string& tokenizer, const TempDir& dir, const std::string& name, const json& messages,
                     const json& kwargs) {
  auto file = dir.write_file(name, messages.dump());
  EXPECT_TRUE(file.ok());
  if (!file.ok()) return {};
  std::vector<std::string> args = {"render", "--model", tokenizer_dir(tokenizer), "--messages", *file};
  if (kwargs.value("enable_thinking", true) == false) args.push_back("--no-thinking");
  auto result = run_command(lockstep_binary(), args);
  EXPECT_TRUE(result.ok());
  return result.ok() ? *result : CommandResult{};
}

TEST_P(CliText, RenderMatchesTheReferencePrompts) {
  auto chats = read_json_file(test_data("tokenizers/" + GetParam() + "/chat.json"));
  ASSERT_TRUE(chats.ok());
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  for (const auto& c : (*chats)["cases"]) {
    CommandResult result = render(GetParam(), *dir, "messages.json", c["messages"], c["kwargs"]);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(result.out, c["prompt"].get<std::string>());
  }
}

// render takes messages as the server's chat route does: content as text parts means the same
// text, and an assistant message of calls alone may have null content.
TEST_P(CliText, RenderTakesTextPartsAndNullContentAsTheServerDoes) {
  auto chats = read_json_file(test_data("tokenizers/" + GetParam() + "/chat.json"));
  ASSERT_TRUE(chats.ok());
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  const json& c = (*chats)["cases"][0];
  json parts = c["messages"];
  for (json& message : parts) {
    const std::string content = message["content"];
    const size_t half = content.size() / 2;
    message["content"] = json::array({{{"type", "text"}, {"text", content.substr(0, half)}},
                                      {{"type", "text"}, {"text", content.substr(half)}}});
  }
  CommandResult result = render(GetParam(), *dir, "parts.json", parts, c["kwargs"]);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, c["prompt"].get<std::string>());
  if (GetParam() == "gemma3") {
    // Gemma 3's template reads parts itself (it trims each, and takes a system message's first
    // alone): they go to it as parts, as transformers passes them, not joined.
    const json spaced = json::parse(R"([
      {"role": "system", "content": [{"type": "text", "text": "You are "}, {"type": "text", "text": "terse."}]},
      {"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "2+2?"}]}])");
    CommandResult gemma = render(GetParam(), *dir, "spaced.json", spaced, {{"add_generation_prompt", true}});
    ASSERT_EQ(gemma.exit_code, 0) << gemma.err;
    EXPECT_EQ(gemma.out, "<bos><start_of_turn>user\nYou are \n\nWhat is2+2?<end_of_turn>\n<start_of_turn>model\n");
  }
  if (GetParam() != "qwen3" && GetParam() != "deepseek_v3") return;
  const json calls = json::parse(R"([{"role": "user", "content": "weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])");
  CommandResult rendered = render(GetParam(), *dir, "calls.json", calls, json::object());
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
  // Qwen3 prints the call with tojson; DeepSeek V3 renders calls only under null content, and
  // joins the arguments' text as the client sent it.
  const std::string call = GetParam() == "qwen3" ? "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
                                                 : "get_weather\n```json\n{\"city\": \"Paris\"}\n```";
  EXPECT_NE(rendered.out.find(call), std::string::npos) << rendered.out;
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, CliText, ::testing::Values("qwen3", "llama3_1", "deepseek_v3", "gemma3"));

TEST(CliTextErrors, MissingFilesAndBadMessagesAreOneLine) {
  auto dir = TempDir::create();
  ASSERT_TRUE(dir.ok());
  auto no_tokenizer = run_command(lockstep_binary(), {"tokenize", "--model", dir->path(), "--text", "hi"});
  ASSERT_TRUE(no_tokenizer.ok());
  EXPECT_NE(no_tokenizer->exit_code, 0);
  EXPECT_NE(no_tokenizer->err.find("tokenizer.json"), std::string::npos) << no_tokenizer->err;
  auto bad = dir->write_file("messages.json", R"({"role": "user"})");
  auto render = run_command(lockstep_binary(), {"render", "--model", dir->path(), "--messages", *bad});
  ASSERT_TRUE(render.ok());
  EXPECT_NE(render->exit_code, 0);
  EXPECT_EQ(render->err.find('\n'), render->err.size() - 1) << "one line: " << render->err;
}

}  // namespace
}  // namespace lockstep
