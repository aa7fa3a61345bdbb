// Small hand-made tokenizer.json files: what loading refuses (by name), and the BPE, added-token
// and decoder rules, with expectations taken from Hugging Face's own unit tests.
#include <gtest/gtest.h>

#include <optional>

#include "io/temp_dir.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace lockstep {
namespace {

using nlohmann::json;

class TokenizerLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Expected<TempDir> made = TempDir::create("tokenizer_load_test");
    ASSERT_TRUE(made.ok()) << made.error().message;
    dir_.emplace(std::move(made).value());
  }

  // A tokenizer over the characters a-z and space, merging nothing, plus `changes`.
  static json base(const json& changes = json::object()) {
    json vocab = json::object();
    for (char c = 'a'; c <= 'z'; ++c) vocab[std::string(1, c)] = c - 'a';
    vocab[" "] = 26;
    json file = {{"version", "1.0"},       {"truncation", nullptr},  {"padding", nullptr},
                 {"added_tokens", json::array()}, {"normalizer", nullptr},
                 {"pre_tokenizer", nullptr}, {"post_processor", nullptr}, {"decoder", nullptr},
                 {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
    file.merge_patch(changes);
    return file;
  }

  // base(changes) with the model's vocabulary replaced by `vocab` (a patch would merge them).
  static json with_vocab(const json& vocab, const json& changes = json::object()) {
    json file = base(changes);
    file["model"]["vocab"] = vocab;
    return file;
  }

  Expected<std::unique_ptr<Tokenizer>> load(const json& file) {
    Expected<std::string> path = dir_->write_file("tokenizer.json", file.dump());
    if (!path.ok()) return path.error();
    return Tokenizer::load(*path);
  }

  // The load error's message; fails the test if the file loads.
  std::string load_error(const json& file) {
    auto loaded = load(file);
    EXPECT_FALSE(loaded.ok());
    return loaded.ok() ? std::string() : loaded.error().message;
  }

  std::optional<TempDir> dir_;
};

TEST_F(TokenizerLoadTest, RefusesUnsupportedFeaturesByName) {
  auto refuses = [&](const json& changes, const std::string& name) {
    std::string message = load_error(base(changes));
    EXPECT_NE(message.find(name), std::string::npos) << "message: " << message;
  };
  refuses({{"normalizer", {{"type", "Lowercase"}}}}, "Lowercase");
  refuses({{"normalizer", {{"type", "NFC"}, {"extra", true}}}}, "extra");
  refuses({{"pre_tokenizer", {{"type", "Whitespace"}}}}, "Whitespace");
  refuses({{"pre_tokenizer", {{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}}}}, "sometimes");
  refuses({{"pre_tokenizer",
            {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}}}},
          "Sideways");
  refuses({{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(a"}}},
                              {"behavior", "Isolated"}}}},
          "(a");
  refuses({{"model", {{"type", "WordPiece"}}}}, "WordPiece");
  refuses({{"model", {{"dropout", 0.1}}}}, "dropout");
  refuses({{"model", {{"continuing_subword_prefix", "##"}}}}, "continuing_subword_prefix");
  refuses({{"model", {{"merges", {"a q"}}}}}, "merge token \"aq\"");
  refuses({{"model", {{"unk_token", "<unk>"}}}}, "<unk>");
  refuses({{"decoder", {{"type", "Metaspace"}}}}, "Metaspace");
  refuses({{"decoder", {{"type", "Sequence"},
                        {"decoders", {{{"type", "Fuse"}}, {{"type", "Strip"}, {"content", " "},
                                                           {"start", 1}, {"stop", 1}}}}}}},
          "Strip after Fuse");
  refuses({{"post_processor", {{"type", "RobertaProcessing"}}}}, "RobertaProcessing");
  refuses({{"truncation", {{"max_length", 8}}}}, "truncation");
  refuses({{"added_tokens", {{{"id", 30}, {"content", "x"}, {"mystery", true}}}}}, "mystery");
  refuses({{"surprise", 1}}, "surprise");
  // Numbers of the wrong kind or size are refused, not converted (a float past int's range
  // was undefined behaviour; the fuzzer found it).
  refuses({{"decoder", {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1e308}}}}, "\"stop\" must be a count");
  refuses({{"added_tokens", {{{"id", 4294967296.0}, {"content", "x"}}}}}, "entry without an id");
  refuses({{"added_tokens", {{{"id", int64_t(1) << 40}, {"content", "x"}}}}}, "entry without an id");
  auto plain = load(base());
  EXPECT_TRUE(plain.ok()) << "the base file must load: " << (plain.ok() ? "" : plain.error().message);
}

TEST_F(TokenizerLoadTest, MissingFileNamesThePath) {
  Expected<std::unique_ptr<Tokenizer>> loaded = Tokenizer::load(dir_->file("absent.json"));
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error().message.find("absent.json"), std::string::npos);
}

TEST_F(TokenizerLoadTest, MergesApplyByRank) {
  // Hugging Face's test_tokenize_with_and_without_dropout: "unrelated" becomes one token.
  json vocab = {{"u", 0},   {"n", 1},    {"r", 2},    {"e", 3},     {"l", 4},       {"a", 5},
                {"t", 6},   {"d", 7},    {"re", 8},   {"at", 9},    {"ed", 10},     {"un", 11},
                {"ated", 12}, {"rel", 13}, {"related", 14}, {"unrelated", 15}};
  json merges = {"r e", "a t", "e d", "u n", "at ed", "re l", "rel ated", "un related"};
  auto tokenizer = load(with_vocab(vocab, {{"model", {{"merges", merges}}}}));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  EXPECT_EQ((*tokenizer)->encode("unrelated"), std::vector<int32_t>{15});
  EXPECT_EQ((*tokenizer)->encode("related"), std::vector<int32_t>{14});
  EXPECT_EQ((*tokenizer)->encode("unreal"), (std::vector<int32_t>{11, 8, 5, 4}));
}

TEST_F(TokenizerLoadTest, MetaspaceSpellsSpacesAndCutsBeforeThem) {
  // Hugging Face's Metaspace: each space becomes "▁", one "▁" goes in front ("always"), and
  // split cuts before every "▁" (its own test: "Hey   friend!" -> "▁Hey", "▁", "▁", "▁friend!").
  // "b ▁" is the only merge, so it shows whether "▁ab▁a" was cut.
  json vocab = {{"\u2581", 0}, {"a", 1}, {"b", 2}, {"b\u2581", 3}};
  auto metaspace = [&](const json& options) {
    json pre_tokenizer = {{"type", "Metaspace"}, {"replacement", "\u2581"}};
    pre_tokenizer.merge_patch(options);
    return load(with_vocab(vocab, {{"model", {{"merges", {"b \u2581"}}}}, {"pre_tokenizer", pre_tokenizer}}));
  };
  auto cut = metaspace({{"prepend_scheme", "always"}, {"split", true}});
  ASSERT_TRUE(cut.ok()) << cut.error().message;
  EXPECT_EQ((*cut)->encode("ab a"), (std::vector<int32_t>{0, 1, 2, 0, 1}));
  EXPECT_EQ((*cut)->encode("a  b"), (std::vector<int32_t>{0, 1, 0, 0, 2}));
  auto whole = metaspace({{"prepend_scheme", "always"}, {"split", false}});
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  EXPECT_EQ((*whole)->encode("ab a"), (std::vector<int32_t>{0, 1, 3, 1}));
  // Older files: add_prefix_space false instead of prepend_scheme "never"; split by default.
  auto bare = metaspace({{"add_prefix_space", false}});
  ASSERT_TRUE(bare.ok()) << bare.error().message;
  EXPECT_EQ((*bare)->encode("ab a"), (std::vector<int32_t>{1, 2, 0, 1}));
}

TEST_F(TokenizerLoadTest, UnknownCharactersFuseOnlyWhenAsked) {
  // Hugging Face's test_unk_not_fused / test_unk_get_fused.
  json vocab = {{"<unk>", 0}, {"a", 1}, {"b", 2}};
  auto separate = load(with_vocab(vocab, {{"model", {{"unk_token", "<unk>"}}}}));
  ASSERT_TRUE(separate.ok()) << separate.error().message;
  EXPECT_EQ((*separate)->encode("accb"), (std::vector<int32_t>{1, 0, 0, 2}));
  auto fused = load(with_vocab(vocab, {{"model", {{"unk_token", "<unk>"}, {"fuse_unk", true}}}}));
  ASSERT_TRUE(fused.ok()) << fused.error().message;
  EXPECT_EQ((*fused)->encode("accb"), (std::vector<int32_t>{1, 0, 2}));
}

TEST_F(TokenizerLoadTest, AddedTokenOptions) {
  // Hugging Face's options_use_cases: "my" takes the spaces around it, "ony" must stand alone.
  json added = {
      {{"id", 27}, {"content", "[CLS]"}, {"special", true}, {"normalized", false}},
      {{"id", 28}, {"content", "[SEP]"}, {"special", true}, {"normalized", false}},
      {{"id", 29}, {"content", "my"}, {"lstrip", true}, {"rstrip", true}},
      {{"id", 30}, {"content", "name"}},
      {{"id", 31}, {"content", "ony"}, {"single_word", true}},
  };
  auto tokenizer = load(base({{"added_tokens", added}}));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  std::vector<int32_t> expected = {27, 29, 30, 26, 8, 18, 26, 0, 13, 19, 7, 14, 13, 24, 26, 28};
  EXPECT_EQ((*tokenizer)->encode("[CLS] my name is anthony [SEP]"), expected);
  EXPECT_EQ((*tokenizer)->encode("ony"), std::vector<int32_t>{31});
  EXPECT_TRUE((*tokenizer)->is_special(27));
  EXPECT_FALSE((*tokenizer)->is_special(29));
}

// Hugging Face's ByteFallback decoder test's tokens: "a", the bytes of 叫 (E5 8F AB), "▁", with
// SentencePiece's decoder (▁ to space, byte runs, fused).
const json kByteFallbackVocab = {{"a", 0}, {"<0xE5>", 1}, {"<0x8f>", 2}, {"<0xab>", 3}, {"▁", 4}};
const json kByteFallbackDecoder = {{"type", "Sequence"},
                                   {"decoders",
                                    {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                                     {{"type", "ByteFallback"}},
                                     {{"type", "Fuse"}}}}};

TEST_F(TokenizerLoadTest, ByteFallbackDecodingAndStreaming) {
  // Hugging Face's ByteFallback decoder test: a run of byte tokens is one string if it is valid
  // UTF-8, else one U+FFFD per byte.
  auto tokenizer = load(with_vocab(kByteFallbackVocab, {{"decoder", kByteFallbackDecoder}}));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  const Tokenizer& t = **tokenizer;
  EXPECT_EQ(t.decode({1, 2, 3, 0}), "叫a");
  EXPECT_EQ(t.decode({1, 2, 0}), "\uFFFD\uFFFDa");
  EXPECT_EQ(t.decode({4, 1}), " \uFFFD");

  StreamingDetokenizer stream(t);
  EXPECT_EQ(stream.push(4), " ");
  EXPECT_EQ(stream.push(1), "");
  EXPECT_EQ(stream.push(2), "");
  EXPECT_EQ(stream.push(3), "");  // complete, but a later byte token could still spoil it
  EXPECT_EQ(stream.push(0), "叫a");
  EXPECT_EQ(stream.push(1), "");
  EXPECT_EQ(stream.finish(), "\uFFFD");
}

TEST_F(TokenizerLoadTest, LongByteRunsStreamInLinearTime) {
  // 30,000 byte tokens in one run (10,000 times 叫): held back whole until a normal token, and
  // not decoded again at each token (which took seconds under the sanitizers).
  auto tokenizer = load(with_vocab(kByteFallbackVocab, {{"decoder", kByteFallbackDecoder}}));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  std::vector<int32_t> ids = {4};
  for (int i = 0; i < 10000; ++i) ids.insert(ids.end(), {1, 2, 3});
  ids.push_back(0);
  for (int i = 0; i < 10000; ++i) ids.insert(ids.end(), {1, 2});  // ill-formed: U+FFFD each
  StreamingDetokenizer stream(**tokenizer);
  std::string streamed;
  size_t pushes_with_text = 0;
  for (int32_t id : ids) {
    std::string text = stream.push(id);
    pushes_with_text += !text.empty();
    streamed += text;
  }
  streamed += stream.finish();
  EXPECT_EQ(streamed, (*tokenizer)->decode(ids));
  EXPECT_EQ(pushes_with_text, 2u);  // the "▁", then the first run with the "a" that ends it
}

TEST_F(TokenizerLoadTest, StripDecoderWorksPerToken) {
  // Hugging Face's Strip test: Strip('H', 1, 0) on ["Hey", " friend!", "HHH"].
  json vocab = {{"Hey", 0}, {" friend!", 1}, {"HHH", 2}};
  json decoder = {{"type", "Strip"}, {"content", "H"}, {"start", 1}, {"stop", 0}};
  auto tokenizer = load(with_vocab(vocab, {{"decoder", decoder}}));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  EXPECT_EQ((*tokenizer)->decode({0, 1, 2}), "ey friend!HH");
}

TEST_F(TokenizerLoadTest, WithoutDecoderTokensJoinWithSpaces) {
  auto tokenizer = load(base());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  EXPECT_EQ((*tokenizer)->decode({7, 8}), "h i");
  StreamingDetokenizer stream(**tokenizer);
  std::string streamed = stream.push(7);
  streamed += stream.push(8);
  EXPECT_EQ(streamed + stream.finish(), "h i");
}

TEST_F(TokenizerLoadTest, TemplateAddsSpecialTokensAround) {
  json post = {{"type", "TemplateProcessing"},
               {"single",
                {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                 {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
               {"special_tokens",
                {{"[CLS]", {{"id", "[CLS]"}, {"ids", {27}}, {"tokens", {"[CLS]"}}}},
                 {"[SEP]", {{"id", "[SEP]"}, {"ids", {28}}, {"tokens", {"[SEP]"}}}}}}};
  auto tokenizer = load(base({{"post_processor", post}}));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  EXPECT_EQ((*tokenizer)->encode("ab", true), (std::vector<int32_t>{27, 0, 1, 28}));
  EXPECT_EQ((*tokenizer)->encode("ab", false), (std::vector<int32_t>{0, 1}));
}

}  // namespace
}  // namespace lockstep
