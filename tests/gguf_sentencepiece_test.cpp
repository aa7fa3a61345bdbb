// GGUF files of SentencePiece models (tokenizer.ggml.model "llama": Llama 2, Mistral 7B and
// their kin): tokens with scores and no merges, read as the byte-fallback BPE those scores
// imply. Checked by hand on a small vocabulary, and on a real one (third_party/tokenizers/llama2,
// 32,000 tokens) against the encodings transformers gives for its folder
// (tests/data/tokenizers/llama2/encodings.json, tools/tokenizer_reference/make_encodings.py).
#include <gtest/gtest.h>

#include <map>

#include "gguf_metadata_writer.h"
#include "io/json_file.h"
#include "io/temp_dir.h"
#include "text/model_text.h"
#include "text/sentencepiece_merges.h"
#include "tokenizer/tokenizer_test_support.h"

namespace lockstep {
namespace {

using nlohmann::json;
using Merges = std::vector<std::pair<std::string, std::string>>;

TEST(SentencePieceMerges, RankedByTheJoinedTokensScoreThenByTheHalvesScores) {
  const std::vector<std::string> tokens = {"a", "b", "c", "ab", "bc", "abc", "ca", "x", "xa"};
  const std::vector<double> scores = {-10, -10, -10, -1, -2, -4, -3, -10, -0.5};
  std::vector<bool> usable(tokens.size(), true);
  usable[7] = false;  // "x": an UNUSED token is neither a join nor a half
  // "abc" splits as a|bc and ab|c: "ab" scores above "a", so ab|c ranks first.
  EXPECT_EQ(sentencepiece_merges(tokens, scores, usable),
            (Merges{{"a", "b"}, {"b", "c"}, {"c", "a"}, {"ab", "c"}, {"a", "bc"}}));
}

TEST(SentencePieceMerges, SplitsOnlyBetweenCharacters) {
  // "é" is two bytes: no split may fall inside it.
  const std::vector<std::string> tokens = {"\xc3", "\xa9", "\xc3\xa9", "e", "\xc3\xa9" "e"};
  EXPECT_EQ(sentencepiece_merges(tokens, {-5, -5, -5, -5, -1}, std::vector<bool>(tokens.size(), true)),
            (Merges{{"\xc3\xa9", "e"}}));
}

// A small SentencePiece vocabulary, written as llama.cpp's converter writes one: types UNKNOWN
// (2), CONTROL (3), BYTE (6) and NORMAL (1); scores; no merges.
std::string small_gguf(const TempDir& temp, bool add_space_prefix) {
  MetadataWriter out;
  out.string("general.architecture", "llama");
  out.string("tokenizer.ggml.model", "llama");
  out.strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0xC3>", "<0xA9>", "\u2581", "a", "b", "c", "ab",
                                        "bc", "\u2581a", "abc", "\u2581ab"});
  out.f32s("tokenizer.ggml.scores", {0, 0, 0, 0, 0, -10, -10, -10, -10, -1, -2, -3, -4, -5});
  out.i32s("tokenizer.ggml.token_type", {2, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  out.u32("tokenizer.ggml.bos_token_id", 1);
  out.u32("tokenizer.ggml.eos_token_id", 2);
  out.u32("tokenizer.ggml.unknown_token_id", 0);
  out.boolean("tokenizer.ggml.add_bos_token", true);
  out.boolean("tokenizer.ggml.add_space_prefix", add_space_prefix);
  const std::string path = temp.file(add_space_prefix ? "spm.gguf" : "spm-no-prefix.gguf");
  out.write(path);
  return path;
}

TEST(GgufSentencePiece, JoinsTheNeighboursWhoseJoinScoresHighest) {
  auto temp = TempDir::create("lockstep-gguf-spm");
  ASSERT_TRUE(temp.ok());
  auto text = ModelText::load(small_gguf(*temp, true));
  ASSERT_TRUE(text.ok()) << text.error().message;
  using Ids = std::vector<int32_t>;
  // "▁abc": ab (-1) first, then abc (-4) over ▁ab (-5).
  EXPECT_EQ(*text->encode("abc", false), (Ids{5, 12}));
  // "▁bc▁a": bc (-2), then ▁a (-3).
  EXPECT_EQ(*text->encode("bc a", false), (Ids{5, 10, 11}));
  // A character without a token: its bytes.
  EXPECT_EQ(*text->encode("\xc3\xa9", false), (Ids{5, 3, 4}));
  // The BOS the file asks for, and a "▁" again after a special token in the text.
  EXPECT_EQ(*text->encode("a<s>a", true), (Ids{1, 11, 1, 11}));
  EXPECT_EQ(text->tokenizer().decode({5, 12}), "abc");
  EXPECT_EQ(text->tokenizer().decode({5, 10, 11}), "bc a");
  EXPECT_EQ(text->tokenizer().decode({5, 3, 4}), "\xc3\xa9");

  // Without add_space_prefix no "▁" goes before the text, and decoding keeps a leading space.
  auto bare = ModelText::load(small_gguf(*temp, false));
  ASSERT_TRUE(bare.ok()) << bare.error().message;
  EXPECT_EQ(*bare->encode("abc", false), (Ids{12}));
  EXPECT_EQ(*bare->encode("abc a", false), (Ids{12, 11}));
  EXPECT_EQ(bare->tokenizer().decode({5, 12}), " abc");
}

TEST(GgufSentencePiece, NeedsMergesOrScores) {
  auto temp = TempDir::create("lockstep-gguf-spm");
  ASSERT_TRUE(temp.ok());
  MetadataWriter out;
  out.string("general.architecture", "llama");
  out.string("tokenizer.ggml.model", "llama");
  out.strings("tokenizer.ggml.tokens", {"a", "b", "ab"});
  out.i32s("tokenizer.ggml.token_type", {1, 1, 1});
  out.f32s("tokenizer.ggml.scores", {0, 0});
  out.write(temp->file("short.gguf"));
  auto text = ModelText::load(temp->file("short.gguf"));
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("tokenizer.ggml.merges or one tokenizer.ggml.scores a token"), std::string::npos)
      << text.error().message;
}

// The GGUF llama.cpp's converter writes for a SentencePiece folder: every token by id, typed
// UNKNOWN, CONTROL, BYTE ("<0x41>") or NORMAL, and either the merges of its tokenizer.json or
// (as from a tokenizer.model) scores. The folder here has no tokenizer.model, so the scores are
// made to rank the tokens as its merges do: a token's score is minus the rank of the first merge
// that makes it (SentencePiece's own scores order the merges so), below those the tokens no
// merge makes.
std::string real_gguf(const std::string& dir, const TempDir& temp, bool with_merges) {
  json tokenizer = *read_json_file(dir + "/tokenizer.json");
  std::vector<std::string> tokens(tokenizer["model"]["vocab"].size());
  for (const auto& [token, id] : tokenizer["model"]["vocab"].items()) tokens.at(id.get<size_t>()) = token;
  std::map<std::string, size_t> id_of;
  for (size_t id = 0; id < tokens.size(); ++id) id_of[tokens[id]] = id;
  std::vector<int32_t> types(tokens.size(), 1);
  for (size_t id = 0; id < tokens.size(); ++id)
    if (tokens[id].size() == 6 && tokens[id].rfind("<0x", 0) == 0) types[id] = 6;
  for (const json& added : tokenizer["added_tokens"]) types.at(added["id"].get<size_t>()) = added["special"] ? 3 : 4;
  types.at(id_of.at("<unk>")) = 2;
  std::vector<float> scores(tokens.size(), 0.0f);
  for (size_t id = 0; id < tokens.size(); ++id) scores[id] = -1e6f - float(id);
  std::vector<std::string> merges;
  for (const json& merge : tokenizer["model"]["merges"]) merges.push_back(merge.get<std::string>());
  for (size_t rank = merges.size(); rank-- > 0;) {
    const std::string& merge = merges[rank];
    const size_t space = merge.find(' ');
    scores.at(id_of.at(merge.substr(0, space) + merge.substr(space + 1))) = -float(rank);
  }
  MetadataWriter out;
  out.string("general.architecture", "llama");
  out.string("tokenizer.ggml.model", "llama");
  out.string("tokenizer.ggml.pre", "default");
  out.strings("tokenizer.ggml.tokens", tokens);
  out.f32s("tokenizer.ggml.scores", scores);
  out.i32s("tokenizer.ggml.token_type", types);
  if (with_merges) out.strings("tokenizer.ggml.merges", merges);
  out.u32("tokenizer.ggml.bos_token_id", uint32_t(id_of.at("<s>")));
  out.u32("tokenizer.ggml.eos_token_id", uint32_t(id_of.at("</s>")));
  out.u32("tokenizer.ggml.unknown_token_id", uint32_t(id_of.at("<unk>")));
  out.boolean("tokenizer.ggml.add_bos_token", true);
  out.boolean("tokenizer.ggml.add_eos_token", false);
  out.boolean("tokenizer.ggml.add_space_prefix", true);
  const std::string path = temp.file(with_merges ? "merges.gguf" : "scores.gguf");
  out.write(path);
  return path;
}

TEST(GgufSentencePiece, ARealVocabularyEncodesAsTransformers) {
  const std::string dir = testing_support::real_tokenizer_dir("llama2");
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "run scripts/fetch-tokenizers";
  auto temp = TempDir::create("lockstep-gguf-spm");
  ASSERT_TRUE(temp.ok());
  const json encodings = *read_json_file(testing_support::tokenizer_fixture_path("llama2", "encodings.json"));
  ASSERT_EQ(encodings["cases"].size(), 42u);
  auto folder = ModelText::load(dir);
  ASSERT_TRUE(folder.ok()) << folder.error().message;
  for (bool with_merges : {false, true}) {
    auto text = ModelText::load(real_gguf(dir, *temp, with_merges));
    ASSERT_TRUE(text.ok()) << text.error().message;
    for (const json& test_case : encodings["cases"]) {
      const std::string input = test_case["text"];
      const auto ids = test_case["ids"].get<std::vector<int32_t>>();
      EXPECT_EQ(*text->encode(input, false), ids) << (with_merges ? "merges: " : "scores: ") << input;
      EXPECT_EQ(*text->encode(input, true), test_case["ids_with_special"].get<std::vector<int32_t>>()) << input;
      EXPECT_EQ(text->tokenizer().decode(ids), test_case["decoded"].get<std::string>()) << input;
    }
    // Special tokens inside a prompt, as a Llama 2 chat prompt has them: the text after each
    // starts with a "▁" as in the folder's tokenizer (legacy) and in llama.cpp.
    const std::string chat = "<s>[INST] Hi there [/INST] Hello!</s><s>[INST] And again? [/INST]";
    EXPECT_EQ(*text->encode(chat, false), *folder->encode(chat, false));
  }
  // The folder itself, as transformers loads it (LlamaTokenizer, legacy), gives the same ids.
  for (const json& test_case : encodings["cases"])
    EXPECT_EQ(*folder->encode(test_case["text"], false), test_case["ids"].get<std::vector<int32_t>>())
        << test_case["text"];
}

}  // namespace
}  // namespace lockstep
