// Python string semantics and case mapping used by the chat-template interpreter; expected
// values are Python's.
#include "chat_template/jinja_strings.h"

#include <gtest/gtest.h>

#include <random>

#include "chat_template/jinja_case.h"

namespace lockstep::jinja {
namespace {

TEST(JinjaStrings, FloatReprMatchesPython) {
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(-2.5), "-2.5");
  EXPECT_EQ(python_float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(0.00001), "1e-05");
  EXPECT_EQ(python_float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(python_float_repr(1e300 * 1e300), "inf");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
}

TEST(JinjaStrings, StripAndSplitUseUnicodeWhitespace) {
  EXPECT_EQ(python_strip("\u00a0 x \u3000", std::nullopt, true, true), "x");
  EXPECT_EQ(python_strip("  x  ", std::nullopt, true, false), "x  ");
  EXPECT_EQ(python_strip("\n\nx\n", std::string("\n"), false, true), "\n\nx");
  EXPECT_EQ(python_strip("ééxé", std::string("é"), true, true), "x");
  EXPECT_EQ(python_split("  a \u2003 b  ", std::nullopt, -1), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(python_split("  a  b c ", std::nullopt, 1), (std::vector<std::string>{"a", "b c "}));
  EXPECT_EQ(python_rsplit("  a  b c ", std::nullopt, 1), (std::vector<std::string>{"  a  b", "c"}));
  EXPECT_EQ(python_split("a,,b", std::string(","), -1), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(python_rsplit("a,b,c", std::string(","), 1), (std::vector<std::string>{"a,b", "c"}));
  EXPECT_EQ(python_splitlines("a\r\nb\rc\u2028d\n", false),
            (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(python_replace("abc", "", "-", -1), "-a-b-c-");
}

TEST(JinjaStrings, Utf8RoundTripsAnyBytes) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(random() % 40, '\0');
    for (char& b : bytes) b = static_cast<char>(random());
    EXPECT_EQ(utf8_encode(utf8_decode(bytes)), bytes);
  }
  EXPECT_EQ(code_point_count("h\u00e9\u2603\U0001F600"), 4u);
}

TEST(JinjaStrings, ReprAndJsonQuoting) {
  EXPECT_EQ(python_string_repr("it's"), "\"it's\"");
  EXPECT_EQ(python_string_repr("a'b\"c\n\x01\u00e9"), "'a\\'b\"c\\n\\x01\u00e9'");
  EXPECT_EQ(json_quote("a\"\\\n\x01\u00e9\U0001F600", false),
            "\"a\\\"\\\\\\n\\u0001\u00e9\U0001F600\"");
  EXPECT_EQ(json_quote("\u00e9\U0001F600", true), "\"\\u00e9\\ud83d\\ude00\"");
}

TEST(JinjaStrings, CaseMapping) {
  EXPECT_EQ(python_upper("h\u00e9llo"), "H\u00c9LLO");
  EXPECT_EQ(python_lower("\u0391\u0392\u0393"), "\u03b1\u03b2\u03b3");
  EXPECT_EQ(python_title("hello wORLD stra\u00dfe"), "Hello World Stra\u00dfe");
  EXPECT_EQ(python_capitalize("hELLO"), "Hello");
  EXPECT_TRUE(python_is("abc", CharClass::kLower));
  EXPECT_FALSE(python_is("", CharClass::kAlpha));
}

}  // namespace
}  // namespace lockstep::jinja
