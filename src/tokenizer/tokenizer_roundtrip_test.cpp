// The real tokenizers on random input: text round trips, ill-formed UTF-8, streaming decode of
// random ids, and long inputs (which must not take quadratic time).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_nfc.h"
#include "tokenizer/tokenizer_test_support.h"
#include "base/utf8.h"

namespace lockstep {
namespace {

using testing_support::real_tokenizer_names;

class RealTokenizerRoundTripTest : public ::testing::TestWithParam<std::string> {
 protected:
  // What decode(encode(text)) gives back: Qwen3 normalizes to NFC, Gemma spells spaces "▁".
  std::string expected_round_trip(const std::string& text) const {
    std::string valid = utf8_lossy(text);
    if (GetParam() == "qwen3") return tokenizer::nfc(valid);
    if (GetParam() == "gemma3") {
      std::string out;
      for (size_t at = 0; at < valid.size();) {
        if (valid.compare(at, 3, "\xE2\x96\x81") == 0) {
          out += ' ';
          at += 3;
        } else {
          out += valid[at++];
        }
      }
      return out;
    }
    return valid;
  }
};

// Random text from pieces that exercise the pre-split patterns, normalization and added tokens.
std::string random_text(std::mt19937& rng, size_t pieces) {
  static const char* const kPieces[] = {
      "a", "Z", "hello", " world", "'s", "'LL", "don't", "0", "42", "12345", " ", "  ", "\t", "\n",
      "\r\n", "\n\n", ".", ",", "!?", "(", "}", "_", "-", "é", "e\u0301", "a\u0323\u0302",
      "\u212B", "\u1100\u1161", "\u11A8", "ß", "Ω", "日本", "語", "の", "テ", "中文", "，", "。", "한",
      "😀", "👍🏽", "\u200D", "\u200B", "\u00A0", "\u3000", "\u0085", "مرحبا", "नमस्ते", "∑", "²",
      "<|im_start|>", "<|eot_id|>", "<|begin_of_text|>", "<｜User｜>", "<｜begin▁of▁sentence｜>",
      "<start_of_turn>", "<bos>", "<html>", "<unused7>", "<0x41>", "<s>", "\xF0\x9F", "\xC3"};
  constexpr size_t kCount = sizeof kPieces / sizeof kPieces[0];
  std::uniform_int_distribution<size_t> pick(0, kCount - 1);
  std::string text;
  for (size_t i = 0; i < pieces; ++i) text += kPieces[pick(rng)];
  return text;
}

TEST_P(RealTokenizerRoundTripTest, RandomTextDecodesBackToItself) {
  LOCKSTEP_REAL_TOKENIZER_OR_SKIP(tokenizer, GetParam());
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> length(0, 40);
  for (int round = 0; round < 400; ++round) {
    std::string text = random_text(rng, length(rng));
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(text)), expected_round_trip(text))
        << "text: " << text;
  }
}

TEST_P(RealTokenizerRoundTripTest, RandomBytesEncodeAsTheirLossyText) {
  LOCKSTEP_REAL_TOKENIZER_OR_SKIP(tokenizer, GetParam());
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255), length(0, 64);
  for (int round = 0; round < 300; ++round) {
    std::string bytes;
    for (int i = length(rng); i > 0; --i) bytes += static_cast<char>(byte(rng));
    std::vector<int32_t> ids = tokenizer->encode(bytes);
    EXPECT_EQ(ids, tokenizer->encode(utf8_lossy(bytes)));
    EXPECT_EQ(tokenizer->decode(ids), expected_round_trip(bytes));
  }
}

// Random ids, weighted towards the tokens that hold partial characters: single bytes of the
// byte-level alphabet, or Gemma's <0xXX> byte-fallback tokens.
std::vector<int32_t> partial_character_ids(const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  for (int byte = 0x80; byte < 0x100; ++byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    if (auto id = tokenizer.token_to_id(name)) ids.push_back(*id);
  }
  for (char32_t cp = 0x100; cp < 0x144; ++cp) {  // where the alphabet puts bytes 0x7F-0xA0...
    std::string spelled;
    utf8_append(spelled, cp);
    if (auto id = tokenizer.token_to_id(spelled)) ids.push_back(*id);
  }
  for (char32_t cp = 0xA1; cp < 0x100; ++cp) {  // ...and the Latin-1 bytes stand for themselves
    std::string spelled;
    utf8_append(spelled, cp);
    if (auto id = tokenizer.token_to_id(spelled)) ids.push_back(*id);
  }
  return ids;
}

TEST_P(RealTokenizerRoundTripTest, StreamingDecodeOfRandomIdsEqualsDecode) {
  LOCKSTEP_REAL_TOKENIZER_OR_SKIP(tokenizer, GetParam());
  std::vector<int32_t> partial = partial_character_ids(*tokenizer);
  ASSERT_GT(partial.size(), 50u);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> any_id(-2, tokenizer->vocab_size() + 1);
  std::uniform_int_distribution<size_t> any_partial(0, partial.size() - 1);
  std::uniform_int_distribution<int> length(0, 48), coin(0, 2);
  for (int round = 0; round < 300; ++round) {
    std::vector<int32_t> ids;
    for (int i = length(rng); i > 0; --i)
      ids.push_back(coin(rng) == 0 ? any_id(rng) : partial[any_partial(rng)]);
    for (bool skip_special : {false, true}) {
      StreamingDetokenizer stream(*tokenizer, skip_special);
      std::string streamed;
      for (int32_t id : ids) {
        std::string piece = stream.push(id);
        EXPECT_TRUE(utf8_is_valid(piece));
        streamed += piece;
      }
      streamed += stream.finish();
      EXPECT_EQ(streamed, tokenizer->decode(ids, skip_special)) << "round " << round;
      EXPECT_EQ(stream.finish(), "");
    }
  }
}

TEST_P(RealTokenizerRoundTripTest, StreamingDecodeOfEncodedTextGivesTheText) {
  LOCKSTEP_REAL_TOKENIZER_OR_SKIP(tokenizer, GetParam());
  std::string text = "Hello, 世界! Emoji 😀👍🏽 and accents: café, naïve. 日本語のテキスト。\n";
  StreamingDetokenizer stream(*tokenizer);
  std::string streamed;
  for (int32_t id : tokenizer->encode(text)) streamed += stream.push(id);
  EXPECT_EQ(streamed + stream.finish(), expected_round_trip(text));
}

TEST_P(RealTokenizerRoundTripTest, LongInputsEncodeQuickly) {
  LOCKSTEP_REAL_TOKENIZER_OR_SKIP(tokenizer, GetParam());
  std::vector<std::string> inputs;
  for (const char* run : {"a", " ", "é", "\n", "7", "😀", "!", "\t", "日"}) {
    std::string text;
    while (text.size() < 100 * 1024) text += run;
    inputs.push_back(text);
  }
  std::mt19937 rng(5);
  std::string mixed;
  while (mixed.size() < 1024 * 1024) mixed += random_text(rng, 64);
  inputs.push_back(mixed);
  for (const std::string& input : inputs) {
    auto start = std::chrono::steady_clock::now();
    std::vector<int32_t> ids = tokenizer->encode(input);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(tokenizer->decode(ids), expected_round_trip(input));
    std::printf("  %s: %zu bytes (\"%.8s...\") -> %zu ids in %.3f s\n", GetParam().c_str(),
                input.size(), input.c_str(), ids.size(), seconds);
  }
}

// Constrained decoding matches the bytes of each token: for text without special tokens, those of
// its ids, joined, are the decoded text (Gemma's first token aside: its decoder strips nothing).
TEST_P(RealTokenizerRoundTripTest, TokenBytesJoinToTheDecodedText) {
  LOCKSTEP_REAL_TOKENIZER_OR_SKIP(tokenizer, GetParam());
  std::mt19937 rng(9);
  std::uniform_int_distribution<size_t> length(1, 30);
  for (int round = 0; round < 300; ++round) {
    std::string text = random_text(rng, length(rng));
    std::vector<int32_t> ids = tokenizer->encode(text);
    std::string joined;
    bool special = false;
    for (int32_t id : ids) {
      special = special || tokenizer->is_special(id);
      joined += tokenizer->token_bytes(id);
    }
    if (special) continue;
    EXPECT_EQ(joined, tokenizer->decode(ids)) << "text: " << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, RealTokenizerRoundTripTest,
                         ::testing::ValuesIn(real_tokenizer_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace lockstep
