// GBNF grammars (llama.cpp's `grammar` field): what they match, byte by byte, and how a bad one
// is refused.
#include "grammar/gbnf.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/grammar_matcher.h"
#include "grammar/grammar_test_support.h"

namespace lockstep {
namespace {

bool matches(const Grammar& grammar, const std::string& text) { return testing_support::grammar_matches(grammar, text); }

Grammar compiled(const std::string& text) {
  Grammar grammar;
  Expected<int32_t> root = add_gbnf(grammar, text);
  EXPECT_TRUE(root.ok()) << (root.ok() ? "" : root.error().message);
  if (root.ok()) grammar.set_root(*root);
  return grammar;
}

std::string refusal(const std::string& text) {
  Grammar grammar;
  Expected<int32_t> root = add_gbnf(grammar, text);
  return root.ok() ? "(accepted)" : root.error().message;
}

TEST(Gbnf, RulesAlternativesGroupsAndRepeats) {
  Grammar g = compiled(R"(
# a list of answers
root   ::= answer ("," ws answer)*
answer ::= "yes" | "no" |
           [0-9]{1,3}
ws     ::= [ \t]?
)");
  EXPECT_TRUE(matches(g, "yes"));
  EXPECT_TRUE(matches(g, "yes, no,12,345"));
  EXPECT_FALSE(matches(g, "yes,"));
  EXPECT_FALSE(matches(g, "1234"));
  EXPECT_FALSE(matches(g, "maybe"));
  Grammar counted = compiled("root ::= \"a\"{2} \"b\"{1,} \"c\"{0,1}");
  EXPECT_TRUE(matches(counted, "aab"));
  EXPECT_TRUE(matches(counted, "aabbbc"));
  EXPECT_FALSE(matches(counted, "ab"));
  EXPECT_FALSE(matches(counted, "aabcc"));
}

TEST(Gbnf, CharacterClassesAreCodePointsInUtf8) {
  Grammar g = compiled(R"(root ::= [a-zé-ë\u4e00-\u9fff]+ [^"\\\n] .)");
  EXPECT_TRUE(matches(g, "abc" "\xc3\xa9" "!x"));               // é
  EXPECT_TRUE(matches(g, "\xe4\xb8\xad" "\xe6\x96\x87" "z" "\xf0\x9f\x98\x80"));  // 中文, z, then 😀 (any)
  EXPECT_FALSE(matches(g, "\xc3\xac" "!x"));                     // ì is past ë
  EXPECT_FALSE(matches(g, "ab\"x"));                             // the class after the letters refuses "
  EXPECT_FALSE(matches(g, "ab\nx"));
  EXPECT_FALSE(matches(g, "ab!\xed\xa0\x80"));                   // an encoded surrogate is no character
  Grammar escapes = compiled(R"(root ::= "\x41\u00e9\t\"" [\]\-])");
  EXPECT_TRUE(matches(escapes, "A\xc3\xa9\t\"]"));
  EXPECT_TRUE(matches(escapes, "A\xc3\xa9\t\"-"));
  Grammar empty = compiled(R"(root ::= "" | "x")");
  EXPECT_TRUE(matches(empty, ""));
  EXPECT_TRUE(matches(empty, "x"));
}

// A class's UTF-8 pieces match exactly its code points: around every edge where the encoding
// changes length or a continuation byte wraps, and at random.
TEST(Gbnf, ClassRangesMatchExactlyTheirCodePoints) {
  struct Case {
    const char* grammar;
    uint32_t first, last;  // the class, both ends included
  } cases[] = {{R"(root ::= [\x41-\u07FF])", 0x41, 0x7FF},
               {R"(root ::= [\u0080-\U00010400])", 0x80, 0x10400},
               {R"(root ::= [\u00C5-\uE123])", 0xC5, 0xE123},
               {R"(root ::= [\U0001F600-\U0010FFFF])", 0x1F600, 0x10FFFF}};
  std::mt19937 rng(5);
  for (const Case& c : cases) {
    Grammar g = compiled(c.grammar);
    std::vector<uint32_t> probes;
    for (uint32_t edge : {0x0u, 0x40u, 0x41u, 0x7Fu, 0x80u, 0xBFu, 0xC0u, 0xC4u, 0xC5u, 0x7FFu, 0x800u, 0xFFFu, 0x1000u,
                          0xD7FFu, 0xE000u, 0xE123u, 0xE124u, 0xFFFFu, 0x10000u, 0x103FFu, 0x10400u, 0x10401u,
                          0x1F5FFu, 0x1F600u, 0x3FFFFu, 0x40000u, 0x10FFFFu})
      probes.push_back(edge);
    for (int i = 0; i < 3000; ++i) probes.push_back(rng() % 0x110000);
    for (uint32_t code : probes) {
      if (code >= 0xD800 && code <= 0xDFFF) continue;
      std::string text;
      if (code < 0x80) {
        text = std::string(1, char(code));
      } else if (code < 0x800) {
        text = {char(0xC0 | (code >> 6)), char(0x80 | (code & 0x3F))};
      } else if (code < 0x10000) {
        text = {char(0xE0 | (code >> 12)), char(0x80 | ((code >> 6) & 0x3F)), char(0x80 | (code & 0x3F))};
      } else {
        text = {char(0xF0 | (code >> 18)), char(0x80 | ((code >> 12) & 0x3F)), char(0x80 | ((code >> 6) & 0x3F)),
                char(0x80 | (code & 0x3F))};
      }
      EXPECT_EQ(matches(g, text), code >= c.first && code <= c.last) << c.grammar << " at U+" << std::hex << code;
    }
  }
}

TEST(Gbnf, ABadGrammarIsRefusedSayingWhereAndWhy) {
  EXPECT_NE(refusal("answer ::= \"x\"").find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(refusal("root ::= item").find("'item' is used but not defined"), std::string::npos);
  EXPECT_NE(refusal("root ::= \"a\"\nroot ::= \"b\"").find("line 2, column 1: the rule 'root' is defined twice"),
            std::string::npos);
  EXPECT_NE(refusal("root ::= \"a").find("no closing"), std::string::npos);
  EXPECT_EQ(refusal("root ::= \"é\" [b-a]"), "grammar: line 1, column 15: a character range runs backwards");
  EXPECT_EQ(refusal("root ::= \"\\q\""), "grammar: line 1, column 11: unknown escape '\\q'");
  EXPECT_NE(refusal("root ::= \"\xc0\x80\"").find("not valid UTF-8"), std::string::npos);      // an overlong NUL
  EXPECT_NE(refusal("root ::= \"\xed\xa0\x80\"").find("not valid UTF-8"), std::string::npos);  // a surrogate
  EXPECT_NE(refusal("root ::= \"\xf5\x80\x80\x80\"").find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(refusal("root ::= \"a\"{3,2}").find("below its minimum"), std::string::npos);
  EXPECT_NE(refusal("root ::= \"a\"{5000}").find("over 1024"), std::string::npos);
  EXPECT_NE(refusal("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(refusal("root = \"a\"").find("expected '::='"), std::string::npos);
  EXPECT_NE(refusal("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(refusal("root ::= \"\\uD800\"").find("not a character"), std::string::npos);
  EXPECT_NE(refusal("root ::= [^\\x00-\\U0010FFFF]").find("no character"), std::string::npos);
  EXPECT_NE(refusal("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')')).find("nested deeper"),
            std::string::npos);
  EXPECT_NE(refusal("root ::= \"a\" \"b\"\n  \"c\"").find("line 2"), std::string::npos);
  EXPECT_EQ(refusal("root ::= list\nlist ::= list \",\" item | item\nitem ::= [0-9]"),
            "grammar: the rule 'list' can come back to itself before matching a character (left recursion), which "
            "cannot be followed a byte at a time");
  EXPECT_NE(refusal("root ::= (\"a\"?)* \"b\"").find("a repeat of something that can match nothing"),
            std::string::npos);
  // Right recursion, and a rule that can be empty but is not its own beginning, are fine.
  Grammar right = compiled("root ::= item (\",\" root)?\nitem ::= [0-9] | \"\"");
  EXPECT_TRUE(matches(right, "1,2,,3"));
}

}  // namespace
}  // namespace lockstep
