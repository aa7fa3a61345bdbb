// The four real tokenizers against Hugging Face's own output (tests/data/tokenizers): the
// tokenizers library's encodings from tokenizer.json as written, and transformers' chat prompts
// from the folder, through the tokenizer transformers builds from it.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "io/json_file.h"
#include "text/model_text.h"
#include "tokenizer/tokenizer_test_support.h"

namespace lockstep {
namespace {

using testing_support::real_tokenizer_names;
using testing_support::tokenizer_fixture_path;

class RealTokenizerTest : public ::testing::TestWithParam<std::string> {};

nlohmann::json read_fixture(const std::string& name, const std::string& file) {
  Expected<nlohmann::json> json = read_json_file(tokenizer_fixture_path(name, file));
  EXPECT_TRUE(json.ok()) << json.error().message;
  return json.ok() ? *json : nlohmann::json::object();
}

TEST_P(RealTokenizerTest, EncodingsMatchHuggingFace) {
  LOCKSTEP_REAL_TOKENIZER_OR_SKIP(tokenizer, GetParam());
  nlohmann::json fixture = read_fixture(GetParam(), "encodings.json");
  ASSERT_EQ(fixture.value("add_special_tokens", true), false);
  ASSERT_GT(fixture["cases"].size(), 0u);
  for (const nlohmann::json& test_case : fixture["cases"]) {
    std::string text = test_case["text"];
    std::vector<int32_t> ids = test_case["ids"];
    EXPECT_EQ(tokenizer->encode(text), ids) << "text: " << text;
    EXPECT_EQ(tokenizer->decode(ids), test_case["decoded"].get<std::string>()) << "text: " << text;
  }
}

TEST_P(RealTokenizerTest, ChatPromptsMatchHuggingFace) {
  const std::string dir = testing_support::real_tokenizer_dir(GetParam());
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "run scripts/fetch-tokenizers";
  // The folder as transformers loads it (for DeepSeek V3, whose tokenizer_config names
  // LlamaTokenizerFast, a pipeline other than its tokenizer.json: see tokenizer_transformers.h).
  Expected<ModelText> text = ModelText::load(dir);
  ASSERT_TRUE(text.ok()) << text.error().message;
  ASSERT_TRUE(text->has_tokenizer() && text->has_chat_template());
  const Tokenizer& tokenizer = text->tokenizer();
  nlohmann::json fixture = read_fixture(GetParam(), "chat.json");
  ASSERT_GT(fixture["cases"].size(), 0u);
  for (const nlohmann::json& test_case : fixture["cases"]) {
    std::string prompt = test_case["prompt"];
    std::vector<int32_t> ids = test_case["ids"];
    Expected<std::string> rendered = text->render(test_case["messages"], test_case["kwargs"]);
    ASSERT_TRUE(rendered.ok()) << rendered.error().message;
    EXPECT_EQ(*rendered, prompt);
    Expected<std::vector<int32_t>> encoded = text->encode_chat(test_case["messages"], test_case["kwargs"]);
    ASSERT_TRUE(encoded.ok()) << encoded.error().message;
    EXPECT_EQ(*encoded, ids) << "prompt: " << prompt;
    // Skipping special tokens drops exactly them.
    std::vector<int32_t> plain;
    for (int32_t id : ids)
      if (!tokenizer.is_special(id)) plain.push_back(id);
    EXPECT_LT(plain.size(), ids.size()) << "every prompt holds special tokens";
    EXPECT_EQ(tokenizer.decode(ids, true), tokenizer.decode(plain));
  }
}

TEST_P(RealTokenizerTest, PostProcessorAddsTheFilesSpecialTokens) {
  LOCKSTEP_REAL_TOKENIZER_OR_SKIP(tokenizer, GetParam());
  // Llama 3 and Gemma 3 template a BOS; Qwen3's and DeepSeek V3's post-processor is ByteLevel
  // alone (transformers adds DeepSeek's BOS itself, outside tokenizer.json).
  const std::map<std::string, std::vector<int32_t>> prefix = {
      {"qwen3", {}}, {"llama3_1", {128000}}, {"deepseek_v3", {}}, {"gemma3", {2}}};
  std::vector<int32_t> plain = tokenizer->encode("Hello world");
  std::vector<int32_t> expected = prefix.at(GetParam());
  expected.insert(expected.end(), plain.begin(), plain.end());
  EXPECT_EQ(tokenizer->encode("Hello world", true), expected);
  EXPECT_EQ(tokenizer->encode("", true), prefix.at(GetParam()));
}

TEST_P(RealTokenizerTest, EncodingWithinMaxIdsIsWholeOrNothing) {
  LOCKSTEP_REAL_TOKENIZER_OR_SKIP(tokenizer, GetParam());
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "word " + std::to_string(i) + ", naïve 日本語 text.\n";
  std::vector<int32_t> whole = tokenizer->encode(text, true);
  ASSERT_GT(whole.size(), 1000u);
  // Room for all of them, special tokens included: the whole encoding.
  EXPECT_EQ(tokenizer->encode_within(text, true, whole.size()), whole);
  EXPECT_EQ(tokenizer->encode_within(text, false, whole.size()), tokenizer->encode(text, false));
  // One fewer: none.
  EXPECT_EQ(tokenizer->encode_within(text, true, whole.size() - 1), std::nullopt);
  EXPECT_EQ(tokenizer->encode_within(text, false, 100), std::nullopt);
}

TEST_P(RealTokenizerTest, OneHugeWordIsRefusedByItsLength) {
  LOCKSTEP_REAL_TOKENIZER_OR_SKIP(tokenizer, GetParam());
  // 8 MB with no space: one word for every pre-tokenizer, and the whole text for a tokenizer
  // without one (Gemma 3's). Its length alone says it has more than 1,000 ids, so it is
  // refused after one pass over it, without merging (which takes seconds a round).
  const std::string word(8 << 20, 'x');
  for (int round = 0; round < 5; ++round) EXPECT_EQ(tokenizer->encode_within(word, false, 1000), std::nullopt);
  // A short one is encoded as ever.
  EXPECT_EQ(tokenizer->encode_within("xxxxxxxx", false, 1000), tokenizer->encode("xxxxxxxx"));
}

TEST_P(RealTokenizerTest, VocabularyAndSpecialTokens) {
  LOCKSTEP_REAL_TOKENIZER_OR_SKIP(tokenizer, GetParam());
  struct Expectation {
    int32_t vocab_size;
    std::string special, ordinary;  // an added token that is special, one that is not
  };
  const std::map<std::string, Expectation> expected = {
      {"qwen3", {151669, "<|im_start|>", "<think>"}},
      {"llama3_1", {128256, "<|eot_id|>", "Hello"}},
      {"deepseek_v3", {128815, "<｜begin▁of▁sentence｜>", "<｜User｜>"}},
      {"gemma3", {262145, "<start_of_turn>", "<html>"}},
  };
  const Expectation& want = expected.at(GetParam());
  EXPECT_EQ(tokenizer->vocab_size(), want.vocab_size);
  std::optional<int32_t> special = tokenizer->token_to_id(want.special);
  std::optional<int32_t> ordinary = tokenizer->token_to_id(want.ordinary);
  ASSERT_TRUE(special && ordinary);
  EXPECT_TRUE(tokenizer->is_special(*special));
  EXPECT_FALSE(tokenizer->is_special(*ordinary));
  EXPECT_EQ(tokenizer->id_to_token(*special), want.special);
  EXPECT_EQ(tokenizer->encode(want.special), std::vector<int32_t>{*special});
  EXPECT_EQ(tokenizer->decode({*special, *ordinary}, true), tokenizer->decode({*ordinary}));
  EXPECT_FALSE(tokenizer->id_to_token(-1));
  EXPECT_FALSE(tokenizer->id_to_token(want.vocab_size));
  EXPECT_EQ(tokenizer->decode({-5, want.vocab_size + 7}), "");
}

INSTANTIATE_TEST_SUITE_P(Files, RealTokenizerTest, ::testing::ValuesIn(real_tokenizer_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace lockstep
