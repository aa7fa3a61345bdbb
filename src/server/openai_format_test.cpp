// Completions' text_offset with echo, on Llama 3.1's real tokenizer: the BOS it adds before a
// text prompt is not in the echoed text, so it takes no characters, and every later offset
// points at its token's text in the reply.
#include "server/openai_format.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_support.h"

namespace lockstep {
namespace {

TEST(CompletionLogprobs, EchoOffsetsPointIntoTheTextAndAnAddedBosTakesNone) {
  const std::string dir = testing_support::real_tokenizer_dir("llama3_1");
  if (!std::ifstream(dir + "/tokenizer.json")) GTEST_SKIP() << "run scripts/fetch-tokenizers";
  auto text = ModelText::load(dir);
  ASSERT_TRUE(text.ok()) << text.error().message;
  const std::string prompt = "Héllo wörld, 中文 text";
  auto ids = text->encode(prompt, true);
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(text->tokenizer().is_special(ids->front())) << "Llama 3.1 adds <|begin_of_text|>";
  std::vector<TokenLogprobs> scored;
  for (size_t i = 1; i < ids->size(); ++i) scored.push_back({(*ids)[i], -1.0f, {}});
  TextOffset offset;
  const nlohmann::json lp = completion_logprobs_json(*text, ids->front(), scored, offset, prompt);
  ASSERT_EQ(lp["text_offset"].size(), ids->size());
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_EQ(lp["text_offset"][1], 0);  // the BOS took nothing
  // Each token's text starts at its offset (offsets in characters; the prompt's are 1 or 3 bytes).
  std::u32string wide;
  for (size_t i = 0; i < prompt.size();) {
    const unsigned char c = uint8_t(prompt[i]);
    const int length = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    wide.push_back(c);
    i += size_t(length);
  }
  EXPECT_EQ(offset.characters, int64_t(wide.size()));  // all of the prompt, and nothing for the BOS
  int64_t expected = 0;
  for (size_t i = 1; i < ids->size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i], expected) << "token " << i;
    const std::string bytes = text->tokenizer().token_bytes((*ids)[i]);
    for (unsigned char c : bytes) expected += (c & 0xC0) != 0x80;
  }
  // Generated tokens after it run on from there; a special one (the reply leaves it out) takes none.
  const int32_t end = text->tokenizer().token_to_id("<|eot_id|>").value();
  const int32_t word = text->encode(" more", false)->front();
  const nlohmann::json more = completion_logprobs_json(*text, std::nullopt, {{word, -0.5f, {}}, {end, -0.1f, {}}}, offset);
  EXPECT_EQ(more["text_offset"][0], int64_t(wide.size()));
  EXPECT_EQ(more["text_offset"][1], int64_t(wide.size()) + 5);
  EXPECT_EQ(offset.characters, int64_t(wide.size()) + 5);
}

// Bytes that make no character count as the U+FFFD the reply's text shows for each maximal
// ill-formed piece, so the offsets after them still point at their tokens' text.
TEST(CompletionLogprobs, OffsetsCountEachIllFormedPieceAsOneCharacter) {
  const std::string dir = testing_support::real_tokenizer_dir("llama3_1");
  if (!std::ifstream(dir + "/tokenizer.json")) GTEST_SKIP() << "run scripts/fetch-tokenizers";
  auto text = ModelText::load(dir);
  ASSERT_TRUE(text.ok()) << text.error().message;
  std::map<unsigned char, int32_t> byte_token;  // the tokens of one byte each
  for (int32_t id = 0; id < 512; ++id) {
    const std::string bytes = text->tokenizer().token_bytes(id);
    if (bytes.size() == 1) byte_token.emplace(uint8_t(bytes[0]), id);
  }
  for (unsigned char b : {0x80, 0xE0, 0xE4, 0xB8, 0xAD}) ASSERT_TRUE(byte_token.count(b)) << int(b);
  const int32_t word = text->encode(" word", false)->front();
  auto offsets = [&](std::vector<unsigned char> bytes) {
    std::vector<TokenLogprobs> tokens;
    for (unsigned char b : bytes) tokens.push_back({byte_token[b], -1.0f, {}});
    tokens.push_back({word, -1.0f, {}});
    TextOffset offset;
    const nlohmann::json lp = completion_logprobs_json(*text, std::nullopt, tokens, offset);
    std::vector<int64_t> out = lp["text_offset"].get<std::vector<int64_t>>();
    out.push_back(offset.characters);
    return out;
  };
  // A lone continuation byte is one U+FFFD: " word" starts after it.
  EXPECT_EQ(offsets({0x80}), (std::vector<int64_t>{0, 1, 6}));
  // 中 over three tokens is one character; the tokens after its first start past it.
  EXPECT_EQ(offsets({0xE4, 0xB8, 0xAD}), (std::vector<int64_t>{0, 1, 1, 1, 6}));
  // E0 80 is no character's start (an overlong form): two U+FFFD.
  EXPECT_EQ(offsets({0xE0, 0x80}), (std::vector<int64_t>{0, 1, 2, 7}));
  // A character cut short by a new one: the cut piece is one U+FFFD.
  EXPECT_EQ(offsets({0xE4, 0xB8, 0xE4, 0xB8, 0xAD}), (std::vector<int64_t>{0, 1, 1, 2, 2, 2, 7}));
  // The reply's text shows the same characters.
  for (std::vector<unsigned char> bytes : {std::vector<unsigned char>{0x80}, {0xE0, 0x80}, {0xE4, 0xB8, 0xE4, 0xB8, 0xAD}}) {
    std::vector<int32_t> ids;
    for (unsigned char b : bytes) ids.push_back(byte_token[b]);
    ids.push_back(word);
    const std::string decoded = text->tokenizer().decode(ids);
    int64_t characters = 0;
    for (unsigned char c : decoded) characters += (c & 0xC0) != 0x80;
    EXPECT_EQ(characters, offsets(bytes).back()) << decoded;
  }
}

// A prompt of ids is echoed as its decoding, where a lone continuation byte shows as U+FFFD: the
// offsets go on past it rather than stopping there.
TEST(CompletionLogprobs, AnIdPromptsIllFormedByteDoesNotStopItsOffsets) {
  const std::string dir = testing_support::real_tokenizer_dir("llama3_1");
  if (!std::ifstream(dir + "/tokenizer.json")) GTEST_SKIP() << "run scripts/fetch-tokenizers";
  auto text = ModelText::load(dir);
  ASSERT_TRUE(text.ok()) << text.error().message;
  int32_t lone = -1;
  for (int32_t id = 0; id < 512 && lone < 0; ++id)
    if (text->tokenizer().token_bytes(id) == "\x80") lone = id;
  ASSERT_GE(lone, 0);
  const int32_t bos = text->tokenizer().token_to_id("<|begin_of_text|>").value();
  const int32_t word = text->encode(" word", false)->front();
  const std::vector<int32_t> ids = {bos, word, lone, word, word};
  const std::string echo = text->tokenizer().decode(ids, false);
  std::vector<TokenLogprobs> scored;
  for (size_t i = 1; i < ids.size(); ++i) scored.push_back({ids[i], -1.0f, {}});
  TextOffset offset;
  const nlohmann::json lp = completion_logprobs_json(*text, bos, scored, offset, echo, true);
  EXPECT_EQ(lp["text_offset"], (nlohmann::json{0, 17, 22, 23, 28})) << echo;
  EXPECT_EQ(offset.characters, 33);
}

// Gemma 3's decoder is ByteFallback: bytes that make no character show as one U+FFFD each. The
// tokens after such a piece (from the second on) start where its text puts them.
TEST(CompletionLogprobs, AByteFallbackTextCountsEachIllFormedByte) {
  const std::string dir = testing_support::real_tokenizer_dir("gemma3");
  if (!std::ifstream(dir + "/tokenizer.json")) GTEST_SKIP() << "run scripts/fetch-tokenizers";
  auto text = ModelText::load(dir);
  ASSERT_TRUE(text.ok()) << text.error().message;
  ASSERT_TRUE(text->tokenizer().decodes_byte_fallback());
  const int32_t e4 = text->tokenizer().token_to_id("<0xE4>").value(), b8 = text->tokenizer().token_to_id("<0xB8>").value();
  const int32_t word = text->encode(" word", false)->front();
  const std::vector<int32_t> ids = {e4, b8, word, word};
  std::vector<TokenLogprobs> tokens;
  for (int32_t id : ids) tokens.push_back({id, -1.0f, {}});
  TextOffset offset;
  const nlohmann::json lp = completion_logprobs_json(*text, std::nullopt, tokens, offset);
  const std::string decoded = text->tokenizer().decode(ids);
  int64_t characters = 0;
  for (unsigned char c : decoded) characters += (c & 0xC0) != 0x80;
  EXPECT_EQ(offset.characters, characters) << decoded;            // two U+FFFD, then the words
  EXPECT_EQ(lp["text_offset"][3], characters - (characters - 2) / 2) << decoded;  // the second word
}

}  // namespace
}  // namespace lockstep
