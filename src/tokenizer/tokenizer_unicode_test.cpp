// UTF-8 handling, NFC/NFD and the PCRE2 patterns, against values from Python's unicodedata and
// bytes.decode("utf-8", "replace") (which follow the same Unicode rules as Rust).
#include <gtest/gtest.h>

#include <vector>

#include "tokenizer/tokenizer_nfc.h"
#include "tokenizer/tokenizer_regex.h"
#include "base/utf8.h"

namespace lockstep::tokenizer {
namespace {

TEST(TokenizerNfcTest, MatchesUnicodeData) {
  struct Case {
    const char* input;
    const char* nfc;
    const char* nfd;
  };
  const Case cases[] = {
      {"e\u0301", "\u00E9", "e\u0301"},
      {"\u1100\u1161\u11A8", "\uAC01", "\u1100\u1161\u11A8"},
      {"\u212B", "\u00C5", "A\u030A"},
      {"a\u0302\u0323", "\u1EAD", "a\u0323\u0302"},
      {"\u1E0B\u0323", "\u1E0D\u0307", "d\u0323\u0307"},
      {"q\u0307\u0323", "q\u0323\u0307", "q\u0323\u0307"},
      {"\u00E9\u0301", "\u00E9\u0301", "e\u0301\u0301"},
      {"\u0301e", "\u0301e", "\u0301e"},
      {"\u0344", "\u0308\u0301", "\u0308\u0301"},
      {"\uAC00\u11A8", "\uAC01", "\u1100\u1161\u11A8"},
      {"\u0958", "\u0915\u093C", "\u0915\u093C"},
      {"\U0001D15E", "\U0001D157\U0001D165", "\U0001D157\U0001D165"},
      {"A\u030A\u0301x\u0327\u0301", "\u01FAx\u0327\u0301", "A\u030A\u0301x\u0327\u0301"},
      {"plain ASCII", "plain ASCII", "plain ASCII"},
      {"", "", ""},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(nfc(c.input), c.nfc) << c.input;
    EXPECT_EQ(nfd(c.input), c.nfd) << c.input;
    // Text around the case does not change how it normalizes.
    EXPECT_EQ(nfc(std::string("xy ") + c.input + " z"), std::string("xy ") + c.nfc + " z");
  }
}

TEST(TokenizerUtf8Test, LossyReplacesMaximalSubparts) {
  struct Case {
    std::string bytes, text;
  };
  const std::string bad = "\xEF\xBF\xBD";
  const std::vector<Case> cases = {
      {"\xE2\x82", bad},
      {"\xF0\x80\x80", bad + bad + bad},
      {"a\xED\xA0\x80" "b", "a" + bad + bad + bad + "b"},
      {"\xC3", bad},
      {"\xF4\x90\x80\x80", bad + bad + bad + bad},
      {"\xE0\x9F\x80", bad + bad + bad},
      {"\xF0\x9F\x98", bad},
      {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},
      {"ok", "ok"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(utf8_lossy(c.bytes), c.text);
    EXPECT_EQ(utf8_is_valid(c.bytes), c.bytes == c.text);
  }
}

TEST(TokenizerUtf8Test, UnfinishedTailIsWhatALaterByteCouldComplete) {
  EXPECT_EQ(utf8_unfinished_tail("abc"), 0u);
  EXPECT_EQ(utf8_unfinished_tail("a\xE2"), 1u);
  EXPECT_EQ(utf8_unfinished_tail("a\xE2\x82"), 2u);
  EXPECT_EQ(utf8_unfinished_tail("a\xE2\x82\xAC"), 0u);
  EXPECT_EQ(utf8_unfinished_tail("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8_unfinished_tail("\xE0\x80"), 0u);  // already ill-formed
  EXPECT_EQ(utf8_unfinished_tail("\x82"), 0u);
  EXPECT_EQ(utf8_unfinished_tail("\xC0"), 0u);
}

std::vector<std::string> matches(const Regex& regex, const std::string& text) {
  std::vector<std::string> found;
  regex.for_each_match(text, [&](size_t start, size_t end) {
    found.push_back(text.substr(start, end - start));
  });
  return found;
}

TEST(TokenizerRegexTest, WhitespaceIncludesNextLineAsInOniguruma) {
  Expected<Regex> spaces = Regex::compile("\\s+");
  ASSERT_TRUE(spaces.ok()) << spaces.error().message;
  EXPECT_EQ(matches(*spaces, "a\u0085\u3000 b"), std::vector<std::string>{"\u0085\u3000 "});
  Expected<Regex> others = Regex::compile("[^\\s\\p{L}]+|\\S+");
  ASSERT_TRUE(others.ok()) << others.error().message;
  EXPECT_EQ(matches(*others, "1\u00852 x"), (std::vector<std::string>{"1", "2", "x"}));
}

TEST(TokenizerRegexTest, Qwen3PatternSplitsLikeHuggingFace) {
  Expected<Regex> regex = Regex::compile(
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
  ASSERT_TRUE(regex.ok()) << regex.error().message;
  EXPECT_EQ(matches(*regex, "I'M 42  apples!\n\nok"),
            (std::vector<std::string>{"I", "'M", " ", "4", "2", " ", " apples", "!\n\n", "ok"}));
}

TEST(TokenizerRegexTest, BadPatternNamesItself) {
  Expected<Regex> regex = Regex::compile("(unclosed");
  ASSERT_FALSE(regex.ok());
  EXPECT_NE(regex.error().message.find("(unclosed"), std::string::npos);
}

TEST(TokenizerRegexTest, EscapedLiteralMatchesItself) {
  Expected<Regex> regex = Regex::compile(Regex::escape("a.b*[c] d"));
  ASSERT_TRUE(regex.ok()) << regex.error().message;
  EXPECT_EQ(matches(*regex, "xa.b*[c] dxa-b"), std::vector<std::string>{"a.b*[c] d"});
}

}  // namespace
}  // namespace lockstep::tokenizer
