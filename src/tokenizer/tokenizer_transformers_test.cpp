// A folder's tokenizer as transformers builds it (tokenizer/tokenizer_transformers.h). Every expected
// id here is worked out by hand from the pipeline transformers' LlamaTokenizer.__init__ defines:
// spaces become "▁" and one "▁" is put in front (prepend scheme: "first" unless the config says
// legacy, "never" without add_prefix_space); nothing splits the text between added tokens; a
// character with no token falls back to its "<0xXX>" byte tokens, or is dropped when those are
// missing too (there is no unknown token); BPE then merges by rank over the whole piece.
#include "tokenizer/tokenizer_transformers.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>

#include "io/json_file.h"
#include "io/temp_dir.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_support.h"

namespace lockstep {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

// A SentencePiece-style vocabulary in a byte-level tokenizer.json (like DeepSeek's files, which
// pair a byte-level tokenizer.json with LlamaTokenizerFast): as written, a space is "Ġ".
json sentencepiece_style_file() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"<0x0A>", 3}, {"\u2581", 4},  {"a", 5},
                {"b", 6},     {"\u2581a", 7}, {"ab", 8}, {"\u2581ab", 9}, {"1", 10}, {"2", 11},
                {"12", 12},   {"\u0120", 13}, {"\u0120a", 14}};
  json merges = {"\u2581 a", "a b", "\u2581a b", "1 2", "\u0120 a"};
  auto special = [](int id, const char* text) {
    return json{{"id", id},         {"content", text}, {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                     {"use_regex", true}};
  json ordinary = special(15, "<x>");
  ordinary["special"] = false;
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", {special(0, "<unk>"), special(1, "<s>"), special(2, "</s>"), ordinary}},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level},
          {"post_processor", nullptr},
          {"decoder", byte_level},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

class TransformersRebuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Expected<TempDir> made = TempDir::create("tokenizer_transformers_test");
    ASSERT_TRUE(made.ok()) << made.error().message;
    dir_.emplace(std::move(made).value());
    ASSERT_TRUE(dir_->write_file("tokenizer.json", sentencepiece_style_file().dump()).ok());
  }

  // The folder's tokenizer with this tokenizer_config.json (and config.json, unless null).
  std::unique_ptr<Tokenizer> load(const json& tokenizer_config, const json& model_config = nullptr,
                                  bool tokenizer_json_only = false) {
    EXPECT_TRUE(dir_->write_file("tokenizer_config.json", tokenizer_config.dump()).ok());
    std::filesystem::remove(dir_->file("config.json"));
    if (!model_config.is_null()) {
      EXPECT_TRUE(dir_->write_file("config.json", model_config.dump()).ok());
    }
    Expected<std::unique_ptr<Tokenizer>> loaded = Tokenizer::load_folder(dir_->path(), tokenizer_json_only);
    EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.error().message);
    return loaded.ok() ? std::move(loaded).value() : nullptr;
  }

  static json llama_config(const json& changes = json::object()) {
    json config = {{"tokenizer_class", "LlamaTokenizerFast"}, {"bos_token", "<s>"},
                   {"eos_token", "</s>"}, {"add_bos_token", true}, {"add_eos_token", false}};
    config.merge_patch(changes);
    return config;
  }

  std::optional<TempDir> dir_;
};

TEST_F(TransformersRebuildTest, LlamaClassRunsSentencePiecesPipeline) {
  auto tokenizer = load(llama_config());
  ASSERT_TRUE(tokenizer);
  // "▁ab▁ab": "▁ a" (rank 0) twice, then "▁a b" (rank 2) twice.
  EXPECT_EQ(tokenizer->encode("ab ab"), (Ids{9, 9}));
  EXPECT_EQ(tokenizer->encode("ab ab", true), (Ids{1, 9, 9}));
  // A leading space is already the "▁" that would be put in front.
  EXPECT_EQ(tokenizer->encode(" ab"), (Ids{9}));
  // "▁a\nb": the newline has no token but has its byte token <0x0A>.
  EXPECT_EQ(tokenizer->encode("a\nb"), (Ids{7, 3, 6}));
  // "▁12": digits merge like anything else ("1 2", rank 3); no pre-tokenizer splits them off.
  EXPECT_EQ(tokenizer->encode("12"), (Ids{4, 12}));
  // "é" has neither a token nor the byte tokens <0xC3> <0xA9>: dropped, leaving the "▁".
  EXPECT_EQ(tokenizer->encode("\u00e9"), (Ids{4}));
  // After an added token the text no longer begins the input: no "▁" in front ("first").
  EXPECT_EQ(tokenizer->encode("<s>ab"), (Ids{1, 8}));
  EXPECT_EQ(tokenizer->encode(""), Ids{});
  EXPECT_EQ(tokenizer->encode("", true), (Ids{1}));
  // SentencePiece's decoder: "▁" back to spaces, byte tokens to bytes, the first space dropped.
  EXPECT_EQ(tokenizer->decode({9, 9}), "ab ab");
  EXPECT_EQ(tokenizer->decode({7, 3, 6}), "a\nb");
  // Only the text's first space goes, also when it arrives token by token.
  const Ids ids = {4, 9, 3, 6};
  EXPECT_EQ(tokenizer->decode(ids), " ab\nb");
  StreamingDetokenizer stream(*tokenizer);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  EXPECT_EQ(streamed + stream.finish(), " ab\nb");
}

TEST_F(TransformersRebuildTest, PrependSchemeFollowsLegacyAndAddPrefixSpace) {
  auto legacy = load(llama_config({{"legacy", true}}));
  ASSERT_TRUE(legacy);
  // "always": every piece between added tokens gets its "▁".
  EXPECT_EQ(legacy->encode("<s>ab"), (Ids{1, 9}));
  auto bare = load(llama_config({{"add_prefix_space", false}}));
  ASSERT_TRUE(bare);
  // "never": "ab▁ab" merges "▁ a" (rank 0), "a b" (1), then "▁a b" (2); no Strip in decoding.
  EXPECT_EQ(bare->encode("ab ab"), (Ids{8, 9}));
  EXPECT_EQ(bare->decode({8, 9}), "ab ab");
  EXPECT_EQ(bare->decode({9}), " ab");
}

TEST_F(TransformersRebuildTest, FileAsWrittenWhereTransformersKeepsIt) {
  // As written: ByteLevel splits "ab" and " ab" = "Ġab", where "a b" (rank 1) wins over "Ġ a" (4).
  const Ids as_written = {8, 13, 8};
  auto json_only = load(llama_config(), nullptr, /*tokenizer_json_only=*/true);
  ASSERT_TRUE(json_only);
  EXPECT_EQ(json_only->encode("ab ab"), as_written);
  EXPECT_EQ(json_only->encode("ab ab", true), as_written);  // the file's post-processor: none
  // DeepSeek V3's model type: AutoTokenizer knows its Hub class is wrong and keeps the file; it
  // still takes add_bos_token from tokenizer_config.json.
  auto deepseek = load(llama_config(), {{"model_type", "deepseek_v3"}});
  ASSERT_TRUE(deepseek);
  EXPECT_EQ(deepseek->encode("ab ab"), as_written);
  EXPECT_EQ(deepseek->encode("ab ab", true), (Ids{1, 8, 13, 8}));
  auto fast = load(llama_config({{"tokenizer_class", "PreTrainedTokenizerFast"}, {"add_eos_token", true}}));
  ASSERT_TRUE(fast);
  EXPECT_EQ(fast->encode("ab ab", true), (Ids{1, 8, 13, 8, 2}));
  // Without add_bos_token / add_eos_token the file's post-processor stays.
  auto plain = load({{"tokenizer_class", "PreTrainedTokenizerFast"}, {"bos_token", "<s>"}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->encode("ab ab", true), as_written);
}

TEST_F(TransformersRebuildTest, TokenizerConfigFlagsWinForTheSameAddedToken) {
  json config = llama_config();
  config["added_tokens_decoder"] = {{"2", {{"content", "</s>"}, {"special", false}}},
                                    {"15", {{"content", "<x>"}, {"special", true}, {"rstrip", true}}}};
  auto tokenizer = load(config);
  ASSERT_TRUE(tokenizer);
  EXPECT_TRUE(tokenizer->is_special(2));  // a special token stays special
  EXPECT_TRUE(tokenizer->is_special(15));
  // rstrip: "<x>" takes the spaces after it, and "ab" after an added token gets no "▁".
  EXPECT_EQ(tokenizer->encode("<x>  ab"), (Ids{15, 8}));
  auto as_written = load(config, nullptr, /*tokenizer_json_only=*/true);
  ASSERT_TRUE(as_written);
  EXPECT_FALSE(as_written->is_special(15));
}

TEST_F(TransformersRebuildTest, BosMissingFromTheFilesFailsByName) {
  EXPECT_TRUE(dir_->write_file("tokenizer_config.json", llama_config({{"bos_token", "<bos>"}}).dump()).ok());
  Expected<std::unique_ptr<Tokenizer>> loaded = Tokenizer::load_folder(dir_->path());
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error().message.find("<bos>"), std::string::npos) << loaded.error().message;
}

// DeepSeek V3's real files: its vocabulary is byte-level, so "▁" and "\n" have no token and no
// byte tokens and are dropped, and BPE runs over the letters, digits and signs that are left.
// A text that differs from a chat.json prompt's piece only in its spaces and newlines therefore
// gets that piece's ids from chat.json (transformers 5.17): "What is 2+2?" -> What is 2 + 2 ?
// and "Think step by step: 17*3?" -> Think step b yst ep : 17 * 3 ?.
TEST(TransformersRebuildDeepSeek, SpacesAndNewlinesVanish) {
  const std::string dir = testing_support::real_tokenizer_dir("deepseek_v3");
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "run scripts/fetch-tokenizers";
  Expected<std::unique_ptr<Tokenizer>> loaded = Tokenizer::load_folder(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const Tokenizer& tokenizer = **loaded;
  const Ids what = {3085, 278, 20, 13, 20, 33};
  EXPECT_EQ(tokenizer.encode("What is 2+2?"), what);
  EXPECT_EQ(tokenizer.encode("   What is 2+2?"), what);       // leading spaces
  EXPECT_EQ(tokenizer.encode("What\nis\n\n2 + 2?"), what);     // newlines, spaced digits
  Ids with_bos = {0};                                           // add_bos_token: true
  with_bos.insert(with_bos.end(), what.begin(), what.end());
  EXPECT_EQ(tokenizer.encode("What is 2+2?", true), with_bos);
  const Ids think = {50012, 21192, 68, 934, 755, 28, 1002, 12, 21, 33};
  EXPECT_EQ(tokenizer.encode("Think step by step: 17*3?"), think);
  EXPECT_EQ(tokenizer.encode("Think  step\nby step:17 * 3?"), think);
  // Decoding goes through the Llama decoder too, which knows no "Ġ": the spaces stay lost.
  EXPECT_EQ(tokenizer.decode(what), "Whatis2+2?");
  // tokenizer.json as written keeps the spaces (as "Ġ" tokens).
  Expected<std::unique_ptr<Tokenizer>> as_written = Tokenizer::load_folder(dir, true);
  ASSERT_TRUE(as_written.ok()) << as_written.error().message;
  EXPECT_NE((*as_written)->encode("What is 2+2?"), what);
  EXPECT_EQ((*as_written)->decode((*as_written)->encode("What is 2+2?")), "What is 2+2?");
}

// What transformers adds around a text, by tokenizer_config.json's add_bos_token (Qwen3: false;
// Gemma 3 and DeepSeek V3: true) or, where that is not given, tokenizer.json (Llama 3).
TEST(TransformersRebuildRealFiles, SpecialTokensAroundText) {
  const std::map<std::string, Ids> prefix = {
      {"qwen3", {}}, {"llama3_1", {128000}}, {"deepseek_v3", {0}}, {"gemma3", {2}}};
  for (const auto& [name, expected] : prefix) {
    const std::string dir = testing_support::real_tokenizer_dir(name);
    if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "run scripts/fetch-tokenizers";
    Expected<std::unique_ptr<Tokenizer>> loaded = Tokenizer::load_folder(dir);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    EXPECT_EQ((*loaded)->encode("", true), expected) << name;
  }
}

}  // namespace
}  // namespace lockstep
