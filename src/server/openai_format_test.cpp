// Completions' text_offset with echo, on Llama 3.1's real tokenizer: the BOS it adds before a
// text prompt is not in the echoed text, so it takes no characters, and every later offset
// points at its token's text in the reply.
#include "server/openai_format.h"

#include <gtest/gtest.h>

#include <fstream>

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
  int64_t offset = 0;
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
  EXPECT_EQ(offset, int64_t(wide.size()));  // all of the prompt, and nothing for the BOS
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
  EXPECT_EQ(offset, int64_t(wide.size()) + 5);
}

}  // namespace
}  // namespace lockstep
