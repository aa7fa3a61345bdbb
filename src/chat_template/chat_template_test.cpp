// Chat templates of real models render exactly as transformers' apply_chat_template: the
// reference prompts of tests/data/tokenizers/<name>/chat.json, and further conversations whose
// expected prompts were rendered with jinja2 3.1 set up as transformers sets it up.
#include "chat_template/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "io/json_file.h"
#include "io/temp_dir.h"

namespace lockstep {
namespace {

std::string config_path(const std::string& model) {
  return LOCKSTEP_TEST_DATA "/../../third_party/tokenizers/" + model + "/tokenizer_config.json";
}

// The model's chat settings, or nullopt (and the test skipped by the caller) when the
// tokenizer files were not fetched.
std::optional<ChatSettings> load_or_skip(const std::string& model) {
  if (!std::filesystem::exists(config_path(model))) return std::nullopt;
  auto settings = load_chat_settings(config_path(model));
  EXPECT_TRUE(settings.ok()) << settings.error().message;
  if (!settings.ok()) return std::nullopt;
  return std::move(settings).value();
}

#define LOAD_OR_SKIP(settings, model)                         \
  std::optional<ChatSettings> settings = load_or_skip(model); \
  if (!settings)                                              \
  GTEST_SKIP() << config_path(model) << " is absent: run scripts/fetch-tokenizers first"

const nlohmann::json kConversation = nlohmann::json::parse(R"([
  {"role": "system", "content": "You are terse."},
  {"role": "user", "content": "Hi "},
  {"role": "assistant", "content": "<think>\nplan\n</think>\n\nHello."},
  {"role": "user", "content": "Bye"}])");

class ChatTemplateModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateModel, RendersEveryReferencePromptExactly) {
  LOAD_OR_SKIP(settings, GetParam());
  auto chat = read_json_file(LOCKSTEP_TEST_DATA "/tokenizers/" + GetParam() + "/chat.json");
  ASSERT_TRUE(chat.ok()) << chat.error().message;
  const nlohmann::json& cases = (*chat)["cases"];
  ASSERT_FALSE(cases.empty());
  for (const nlohmann::json& reference : cases) {
    auto prompt = render_chat(*settings, reference["messages"], reference["kwargs"]);
    ASSERT_TRUE(prompt.ok()) << prompt.error().message;
    EXPECT_EQ(*prompt, reference["prompt"].get<std::string>()) << reference.dump();
  }
}

TEST_P(ChatTemplateModel, RendersOtherConversationsWithoutErrors) {
  LOAD_OR_SKIP(settings, GetParam());
  const char* conversations[] = {
      R"([{"role": "user", "content": "One"}])",
      R"([{"role": "system", "content": "S"}, {"role": "user", "content": "Q1"},
          {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"}])",
      R"([{"role": "user", "content": "ünïcödé 😀 中文\n\n  spaced  "}, {"role": "assistant", "content": "ok"},
          {"role": "user", "content": ""}])",
  };
  for (const char* conversation : conversations) {
    for (const char* kwargs :
         {"{}", R"({"enable_thinking": false})", R"({"enable_thinking": true})"}) {
      auto prompt = render_chat(*settings, nlohmann::json::parse(conversation),
                                nlohmann::json::parse(kwargs));
      ASSERT_TRUE(prompt.ok()) << prompt.error().message;
      EXPECT_FALSE(prompt->empty());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ChatTemplateModel,
                         ::testing::Values("qwen3", "llama3_1", "deepseek_v3", "gemma3"));

// 100,000 tags on one line: the lexer counted each token's column from the line's start, so
// loading this took over a minute; positions are now counted on from the last token.
TEST(ChatTemplate, AHundredThousandTagsOnOneLineParseAndRender) {
  std::string source;
  for (int i = 0; i < 100000; ++i) source += "{{ 'a' }}";
  auto parsed = ChatTemplate::parse(source);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  auto rendered = parsed->render(nlohmann::json::object());
  ASSERT_TRUE(rendered.ok()) << rendered.error().message;
  EXPECT_EQ(*rendered, std::string(100000, 'a'));
  // Positions stay right after the change: an error late on a long line names its column.
  auto bad = ChatTemplate::parse(std::string(50000, 'x') + "{{ 'a' }}{{ ) }}");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("line 1, column 50013"), std::string::npos) << bad.error().message;
}

TEST(ChatTemplate, LoadsSpecialTokensAsStringsOrObjects) {
  LOAD_OR_SKIP(deepseek, "deepseek_v3");
  EXPECT_EQ(deepseek->bos_token, "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(deepseek->eos_token, "<｜end▁of▁sentence｜>");
  LOAD_OR_SKIP(qwen, "qwen3");
  EXPECT_EQ(qwen->bos_token, "");  // null in the file: the template sees no bos_token
  EXPECT_EQ(qwen->eos_token, "<|im_end|>");
}

TEST(ChatTemplate, Qwen3SystemMultiTurnAndThinking) {
  LOAD_OR_SKIP(settings, "qwen3");
  auto prompt = render_chat(*settings, kConversation, {{"enable_thinking", false}});
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  EXPECT_EQ(*prompt,
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi <|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplate, Qwen3ToolsKeepTheCallersKeyOrder) {
  LOAD_OR_SKIP(settings, "qwen3");
  auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "21C"}])");
  auto kwargs = nlohmann::ordered_json::parse(R"({"tools": [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})");
  auto prompt = render_chat(*settings, messages, kwargs);
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  EXPECT_EQ(
      *prompt,
      "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user "
      "query.\n\nYou are provided with function signatures within <tools></tools> XML "
      "tags:\n<tools>\n"
      "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
      "\"Weather in a "
      "city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
      "\"string\"}}, "
      "\"required\": [\"city\"]}}}\n</tools>\n\nFor each function call, return a json object with "
      "function "
      "name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
      "<function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\n"
      "Weather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": "
      "\"get_weather\", "
      "\"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"
      "21C\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama31TrimsContentAndStartsWithBos) {
  LOAD_OR_SKIP(settings, "llama3_1");
  auto prompt = render_chat(*settings, kConversation);
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  EXPECT_EQ(
      *prompt,
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant"
      "<|end_header_id|>\n\n<think>\nplan\n</think>\n\nHello.<|eot_id|><|start_header_id|>user"
      "<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, DeepSeekV3SystemPromptFirst) {
  LOAD_OR_SKIP(settings, "deepseek_v3");
  auto prompt = render_chat(*settings, kConversation);
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  EXPECT_EQ(
      *prompt,
      "<｜begin▁of▁sentence｜>You are terse.<｜User｜>Hi <｜Assistant｜><think>\nplan\n</think>\n\n"
      "Hello.<｜end▁of▁sentence｜><｜User｜>Bye<｜Assistant｜>");
}

TEST(ChatTemplate, Gemma3FoldsTheSystemPromptAndRejectsNonAlternatingRoles) {
  LOAD_OR_SKIP(settings, "gemma3");
  auto prompt = render_chat(*settings, kConversation);
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  EXPECT_EQ(
      *prompt,
      "<bos><start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\n<think>\n"
      "plan\n</think>\n\nHello.<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n"
      "<start_of_turn>model\n");
  auto rejected = render_chat(*settings, nlohmann::json::parse(R"([{"role": "user", "content": "a"},
                                                                    {"role": "user", "content": "b"}])"));
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.error().message,
            "chat template line 19, column 12: Conversation roles must alternate "
            "user/assistant/user/assistant/...");
}

TEST(ChatTemplate, ExtraKeywordArgumentsOverrideTheDefaults) {
  auto parsed =
      ChatTemplate::parse("{{ add_generation_prompt }} {{ tools }} {{ bos_token }} {{ custom }}");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  ChatSettings settings{std::move(parsed).value(), "<s>", "</s>", ""};
  auto prompt = render_chat(settings, nlohmann::json::array(),
                            {{"add_generation_prompt", false}, {"custom", 7}});
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  EXPECT_EQ(*prompt, "False None <s> 7");
}

TEST(ChatTemplate, LoadsTheDefaultOfNamedTemplates) {
  auto dir = TempDir::create("chat_template_test");
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  auto path = dir->write_file("tokenizer_config.json", R"({
    "bos_token": {"content": "<B>", "lstrip": false}, "eos_token": "<E>",
    "chat_template": [{"name": "tool_use", "template": "tools"},
                      {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}"}]})");
  ASSERT_TRUE(path.ok());
  auto settings = load_chat_settings(*path);
  ASSERT_TRUE(settings.ok()) << settings.error().message;
  EXPECT_EQ(settings->eos_token, "<E>");
  auto prompt =
      render_chat(*settings, nlohmann::json::parse(R"([{"role": "user", "content": "x"}])"));
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  EXPECT_EQ(*prompt, "<B>x");
}

TEST(ChatTemplate, LoadErrorsNameTheFile) {
  auto dir = TempDir::create("chat_template_test");
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  auto none = dir->write_file("none.json", R"({"eos_token": "<E>"})");
  auto bad = dir->write_file("bad.json", R"({"chat_template": "ok\n{% if x %}"})");
  ASSERT_TRUE(none.ok() && bad.ok());
  auto missing = load_chat_settings(*none);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, *none + ": no chat_template");
  auto unparsable = load_chat_settings(*bad);
  ASSERT_FALSE(unparsable.ok());
  EXPECT_EQ(unparsable.error().message, *bad +
                                            ": chat template line 2, column 4: unclosed 'if' tag "
                                            "(expected 'elif' or 'else' or 'endif')");
  EXPECT_FALSE(load_chat_settings(dir->file("absent.json")).ok());
}

}  // namespace
}  // namespace lockstep
