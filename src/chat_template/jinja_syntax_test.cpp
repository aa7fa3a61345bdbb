// Statements and whitespace control of the chat-template interpreter. Expected outputs are
// jinja2's (3.1, trim_blocks and lstrip_blocks on, as transformers sets them).
#include <gtest/gtest.h>

#include "chat_template/jinja_test_support.h"

namespace lockstep {
namespace {

using testing_jinja::render;

TEST(JinjaSyntax, TextAndOutput) {
  EXPECT_EQ(render("plain text"), "plain text");
  EXPECT_EQ(render("{{ 1 }}{{ 'x' }}{{ none }}{{ true }}{{ False }}{{ 1.0 }}"),
            "1xNoneTrueFalse1.0");
  EXPECT_EQ(render("{{ [1, 'a', none, true] }}{{ {'a': 1} }}"), "[1, 'a', None, True]{'a': 1}");
  EXPECT_EQ(render("{{ a }}-{{ b }}", R"({"a": "x", "b": 2})"), "x-2");
}

TEST(JinjaSyntax, NewlinesAreNormalisedAndOneTrailingNewlineDropped) {
  EXPECT_EQ(render("a\nb\n"), "a\nb");
  EXPECT_EQ(render("a\n\n"), "a\n");
  EXPECT_EQ(render("a\r\nb\rc"), "a\nb\nc");
}

TEST(JinjaSyntax, TrimBlocksAndLstripBlocks) {
  EXPECT_EQ(render("  {% if true %}\n  yes\n  {% endif %}\n  end"), "  yes\n  end");
  EXPECT_EQ(render("{% if true %}  yes  {% endif %}"), "  yes  ");
  EXPECT_EQ(render("a {% if true %}b{% endif %}\n c"), "a b c");
  EXPECT_EQ(render("{% for x in [1, 2] %}\n  {{ x }}\n{% endfor %}"), "  1\n  2\n");
  EXPECT_EQ(render("line1\n    {# comment #}\nline2"), "line1\nline2");
  // lstrip_blocks leaves expression tags alone.
  EXPECT_EQ(render("  {{ 'v' }}\n"), "  v");
}

TEST(JinjaSyntax, MinusStripsAllWhitespaceOnItsSide) {
  EXPECT_EQ(render("x  {%- if true -%}  y  {%- endif -%}  z"), "xyz");
  EXPECT_EQ(render("x  {{- 'y' -}}  z"), "xyz");
  EXPECT_EQ(render("{% for x in [1, 2] -%}\n  {{ x }}\n{%- endfor %}"), "12");
  EXPECT_EQ(render("line1\n    {#- comment -#}\n   line2"), "line1line2");
  EXPECT_EQ(render("a\n\n  {{- 'b' }}"), "ab");
}

TEST(JinjaSyntax, PlusKeepsWhitespace) {
  EXPECT_EQ(render("  {%+ if true %}a{% endif %}"), "  a");
  EXPECT_EQ(render("{% if true +%}\na{% endif %}"), "\na");
}

TEST(JinjaSyntax, RawBlocks) {
  EXPECT_EQ(render("{% raw %}{{ not rendered }}{% endraw %}"), "{{ not rendered }}");
  EXPECT_EQ(render("  {% raw %}\n  {{ x }}\n  {% endraw %}\nafter"), "\n  {{ x }}\nafter");
}

TEST(JinjaSyntax, IfElifElse) {
  const char* source = "{% if n > 3 %}big{% elif n > 1 %}mid{% else %}small{% endif %}";
  EXPECT_EQ(render(source, R"({"n": 5})"), "big");
  EXPECT_EQ(render(source, R"({"n": 2})"), "mid");
  EXPECT_EQ(render(source, R"({"n": 0})"), "small");
  EXPECT_EQ(render("{% if missing %}a{% elif missing.x is defined %}b{% endif %}|"),
            "error: chat template line 1, column 33: 'missing' is undefined");
}

TEST(JinjaSyntax, LoopVariables) {
  EXPECT_EQ(
      render(
          "{% for x in [3, 1, 2] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}"
          "{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %}"),
      "10TrueFalse332|21FalseFalse321|32FalseTrue310|");
  EXPECT_EQ(render("{% for x in [3, 1, 2] %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}"),
            "-1|3-2|1-|");
  EXPECT_EQ(render("{% for x in [3, 1, 2] %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "aba");
}

TEST(JinjaSyntax, LoopElseFilterAndControl) {
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [3, 1, 2] if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}"),
            "3222");
  EXPECT_EQ(render("{% for x in [3, 1, 2] if x > 5 %}{{ x }}{% else %}none{% endfor %}"), "none");
  EXPECT_EQ(render("{% for x in [3, 1, 2] %}{% if x == 1 %}{% continue %}{% endif %}"
                   "{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "3");
}

TEST(JinjaSyntax, LoopIterationAndUnpacking) {
  const char* data = R"({"d": {"b": 1, "a": [1, 2]}, "pairs": [[1, 2], [3, 4]]})";
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", data),
            "b=1;a=[1, 2];");
  EXPECT_EQ(render("{% for k in d %}{{ k }};{% endfor %}", data), "b;a;");
  EXPECT_EQ(render("{% for c in 'abc' %}{{ c }},{% endfor %}"), "a,b,c,");
  EXPECT_EQ(render("{% for (a, b) in pairs %}{{ a + b }}{% endfor %}", data), "37");
  EXPECT_EQ(render("{% for x in missing %}x{% else %}none{% endfor %}"), "none");
  EXPECT_EQ(render("{% for a, b in [1] %}{% endfor %}"),
            "error: chat template line 1, column 8: cannot unpack: 'int' object is not iterable");
}

TEST(JinjaSyntax, SetAndScoping) {
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(render("{% set t = (1, 2) %}{{ t }}{{ t[0] }}"), "(1, 2)1");
  // A set inside a loop body is not seen after the iteration; one inside an if is.
  EXPECT_EQ(
      render(
          "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"),
      "12121");
  EXPECT_EQ(render("{% if true %}{% set x = 5 %}{% endif %}{{ x }}"), "5");
  EXPECT_EQ(render("{% set x %}inner {{ n }}{% endset %}[{{ x }}]", R"({"n": 5})"), "[inner 5]");
  EXPECT_EQ(render("{% set x | upper %}inner{% endset %}[{{ x }}]"), "[INNER]");
}

TEST(JinjaSyntax, NamespaceAttributesOutliveLoops) {
  EXPECT_EQ(
      render("{% set ns = namespace(total=0, found=false) %}{% for i in [3, 1, 2] %}"
             "{% set ns.total = ns.total + i %}{% if i == 1 %}{% set ns.found = true %}{% endif %}"
             "{% endfor %}{{ ns.total }} {{ ns.found }}"),
      "6 True");
  EXPECT_EQ(render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}"), "12");
  EXPECT_EQ(
      render("{% set d = {} %}{% set d.x = 1 %}"),
      "error: chat template line 1, column 24: cannot assign attribute on non-namespace object");
}

TEST(JinjaSyntax, Macros) {
  EXPECT_EQ(render("{% macro m(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ "
                   "m(b=3, a=4) }}"),
            "<1B><12><43>");
  EXPECT_EQ(
      render("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}"),
      "1(2, 3){'k': 4}");
  EXPECT_EQ(
      render(
          "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"),
      "321");
  // A parameter that is not passed is undefined; the macro sees the template's variables.
  EXPECT_EQ(render("{% macro m(a) %}[{{ a }}]{{ s }}{% endmacro %}{{ m() }}", R"({"s": "S"})"),
            "[]S");
  EXPECT_EQ(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").rfind("error: ", 0), 0u);
}

TEST(JinjaSyntax, WithFilterBlockAndGeneration) {
  EXPECT_EQ(render("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}"), "3");
  EXPECT_EQ(render("{% filter upper %}hello {{ s }}{% endfilter %}", R"({"s": "you"})"),
            "HELLO YOU");
  EXPECT_EQ(render("{% generation %}kept{% endgeneration %}"), "kept");
}

}  // namespace
}  // namespace lockstep
