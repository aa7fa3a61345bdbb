// The text side of GGUF files: a GGUF holding the tokenizer and chat template of Llama 3.1 or
// Qwen3 the way llama.cpp's converter writes them (tokenizer.ggml.*, tokenizer.chat_template)
// gives exactly the Hugging Face encodings and chat prompts of those models (the references in
// tests/data/tokenizers, made with tokenizers and transformers).
#include <gtest/gtest.h>


#include "io/json_file.h"
#include "io/temp_dir.h"
#include "text/model_text.h"
#include "tokenizer/tokenizer_test_support.h"
#include "gguf_metadata_writer.h"

namespace lockstep {
namespace {

using nlohmann::json;

// The GGUF that llama.cpp's converter makes of a Hugging Face tokenizer folder: every token by
// id, added special tokens as CONTROL (3), other added ones USER_DEFINED (4), the rest NORMAL
// (1); merges as "left right"; the pre-tokenizer named; the end and begin ids; the template.
void write_gguf(const std::string& dir, const std::string& pre, bool add_bos, const std::string& path) {
  json tokenizer = *read_json_file(dir + "/tokenizer.json");
  json config = *read_json_file(dir + "/tokenizer_config.json");
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto put = [&](size_t id, const std::string& token, int32_t type) {
    if (tokens.size() <= id) tokens.resize(id + 1), types.resize(id + 1, 1);
    tokens[id] = token;
    types[id] = type;
  };
  for (const auto& [token, id] : tokenizer["model"]["vocab"].items()) put(id.get<size_t>(), token, 1);
  for (const json& added : tokenizer["added_tokens"])
    put(added["id"].get<size_t>(), added["content"], added["special"].get<bool>() ? 3 : 4);
  std::vector<std::string> merges;
  for (const json& merge : tokenizer["model"]["merges"])
    merges.push_back(merge.is_string() ? merge.get<std::string>() : merge[0].get<std::string>() + " " + merge[1].get<std::string>());
  auto id_of = [&](const json& token) -> uint32_t {
    const std::string name = token.is_object() ? token["content"].get<std::string>() : token.get<std::string>();
    for (size_t id = 0; id < tokens.size(); ++id)
      if (tokens[id] == name) return uint32_t(id);
    ADD_FAILURE() << "no token " << name;
    return 0;
  };
  MetadataWriter out;
  out.string("general.architecture", pre == "qwen2" ? "qwen3" : "llama");
  out.string("tokenizer.ggml.model", "gpt2");
  out.string("tokenizer.ggml.pre", pre);
  out.strings("tokenizer.ggml.tokens", tokens);
  out.i32s("tokenizer.ggml.token_type", types);
  out.strings("tokenizer.ggml.merges", merges);
  out.u32("tokenizer.ggml.eos_token_id", id_of(config["eos_token"]));
  if (config.contains("bos_token") && !config["bos_token"].is_null()) out.u32("tokenizer.ggml.bos_token_id", id_of(config["bos_token"]));
  out.boolean("tokenizer.ggml.add_bos_token", add_bos);
  out.string("tokenizer.chat_template", config["chat_template"]);
  out.write(path);
}

struct Case {
  std::string name;  // the fetched tokenizer (third_party/tokenizers)
  std::string pre;   // llama.cpp's name of its pre-tokenizer
  bool add_bos;
};

class GgufText : public ::testing::TestWithParam<Case> {};

TEST_P(GgufText, EncodingsAndChatPromptsEqualHuggingFace) {
  const Case& c = GetParam();
  const std::string dir = testing_support::real_tokenizer_dir(c.name);
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "run scripts/fetch-tokenizers";
  auto temp = TempDir::create("lockstep-gguf-text");
  ASSERT_TRUE(temp.ok());
  const std::string path = temp->file("model.gguf");
  write_gguf(dir, c.pre, c.add_bos, path);
  auto text = ModelText::load(path);
  ASSERT_TRUE(text.ok()) << text.error().message;
  ASSERT_TRUE(text->has_tokenizer() && text->has_chat_template());
  json encodings = *read_json_file(testing_support::tokenizer_fixture_path(c.name, "encodings.json"));
  ASSERT_GT(encodings["cases"].size(), 0u);
  for (const json& test_case : encodings["cases"]) {
    const std::string input = test_case["text"];
    EXPECT_EQ(*text->encode(input, false), test_case["ids"].get<std::vector<int32_t>>()) << input;
    EXPECT_EQ(text->tokenizer().decode(test_case["ids"].get<std::vector<int32_t>>()), test_case["decoded"].get<std::string>());
  }
  json chats = *read_json_file(testing_support::tokenizer_fixture_path(c.name, "chat.json"));
  for (const json& test_case : chats["cases"]) {
    auto rendered = text->render(test_case["messages"], test_case["kwargs"]);
    ASSERT_TRUE(rendered.ok()) << rendered.error().message;
    EXPECT_EQ(*rendered, test_case["prompt"].get<std::string>());
    EXPECT_EQ(*text->encode_chat(test_case["messages"], test_case["kwargs"]), test_case["ids"].get<std::vector<int32_t>>());
  }
  // The folder's own tokenizer agrees on what add_special_tokens adds (Llama 3's BOS).
  auto folder = ModelText::load(dir);
  ASSERT_TRUE(folder.ok());
  EXPECT_EQ(*text->encode("Hello there", true), *folder->encode("Hello there", true));
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GgufText,
                         ::testing::Values(Case{"llama3_1", "llama-bpe", true}, Case{"qwen3", "qwen2", false}),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Tekken (Mistral NeMo's tokenizer; no Hugging Face encodings are on record for it here): the
// GGUF the converter would write gives the ids, the BOS and the text of the tokenizer.json it
// came from, on every string of the other tokenizers' references (prose, code, digits,
// whitespace runs, CJK, Arabic, emoji, combining marks, special-token text).
TEST(GgufTextTekken, EncodesAsItsTokenizerJson) {
  const std::string dir = testing_support::real_tokenizer_dir("mistral_nemo");
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "run scripts/fetch-tokenizers";
  auto temp = TempDir::create("lockstep-gguf-text");
  ASSERT_TRUE(temp.ok());
  write_gguf(dir, "tekken", true, temp->file("model.gguf"));
  auto text = ModelText::load(temp->file("model.gguf"));
  ASSERT_TRUE(text.ok()) << text.error().message;
  auto folder = ModelText::load(dir);
  ASSERT_TRUE(folder.ok()) << folder.error().message;
  ASSERT_EQ(text->tokenizer().vocab_size(), folder->tokenizer().vocab_size());
  size_t strings = 0;
  for (const std::string name : {"qwen3", "llama3_1", "deepseek_v3", "gemma3"}) {
    json encodings = *read_json_file(testing_support::tokenizer_fixture_path(name, "encodings.json"));
    for (const json& test_case : encodings["cases"]) {
      const std::string input = test_case["text"];
      const std::vector<int32_t> ids = *folder->encode(input, true);
      ASSERT_EQ(ids.front(), 1) << "<s> first";
      EXPECT_EQ(*text->encode(input, true), ids) << input;
      EXPECT_EQ(text->tokenizer().decode(ids), folder->tokenizer().decode(ids)) << input;
      ++strings;
    }
  }
  EXPECT_GT(strings, 100u);
  // Tekken's words of capitals and small letters split where its pattern splits them.
  EXPECT_EQ(*text->encode("HTTPServer camelCase", false), *folder->encode("HTTPServer camelCase", false));
}

// Ids the converter pads the vocabulary with (type UNUSED, "[PAD3]") are no token: nothing
// encodes to them and they decode to nothing, as with the Hugging Face tokenizer they are not in.
TEST(GgufTextPadding, UnusedIdsAreNoToken) {
  auto temp = TempDir::create("lockstep-gguf-text");
  ASSERT_TRUE(temp.ok());
  MetadataWriter out;
  out.string("general.architecture", "qwen3");
  out.string("tokenizer.ggml.model", "gpt2");
  out.string("tokenizer.ggml.pre", "qwen2");
  out.strings("tokenizer.ggml.tokens", {"a", "b", "ab", "[PAD3]"});
  out.i32s("tokenizer.ggml.token_type", {1, 1, 1, 5});
  out.strings("tokenizer.ggml.merges", {"a b"});
  out.write(temp->file("padded.gguf"));
  auto text = ModelText::load(temp->file("padded.gguf"));
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text->encode("ab", false), std::vector<int32_t>{2});
  EXPECT_EQ(text->tokenizer().token_to_id("[PAD3]"), std::nullopt);
  EXPECT_EQ(text->tokenizer().id_to_token(3), std::nullopt);
  EXPECT_EQ(text->tokenizer().decode({2, 3}), "ab");
}

TEST(GgufTextErrors, ATokenizerLockstepDoesNotReadIsNamed) {
  auto temp = TempDir::create("lockstep-gguf-text");
  ASSERT_TRUE(temp.ok());
  MetadataWriter out;
  out.string("general.architecture", "llama");
  out.string("tokenizer.ggml.model", "t5");  // SentencePiece's unigram model
  out.strings("tokenizer.ggml.tokens", {"a", "b"});
  out.write(temp->file("t5.gguf"));
  auto text = ModelText::load(temp->file("t5.gguf"));
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("tokenizer.ggml.model 't5' is not one lockstep reads"), std::string::npos)
      << text.error().message;
}

}  // namespace
}  // namespace lockstep
