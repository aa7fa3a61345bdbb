// Template errors name the line and column where they happen: syntax errors when parsing,
// unknown filters and tests when parsing (as jinja2 reports them when compiling), and render
// errors (raise_exception, type errors, undefined values) when rendering.
#include <gtest/gtest.h>

#include "chat_template/jinja_test_support.h"

namespace lockstep {
namespace {

using testing_jinja::is_error_at;
using testing_jinja::render;

TEST(JinjaErrors, UnknownFilterAndTestFailAtParse) {
  auto parsed = ChatTemplate::parse("line one\n{{ x | nofilter }}");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message, "chat template line 2, column 8: no filter named 'nofilter'");
  EXPECT_EQ(render("{% if x is notatest %}{% endif %}"),
            "error: chat template line 1, column 12: no test named 'notatest'");
  EXPECT_EQ(render("{{ xs|map('nofilter')|list }}", R"({"xs": [1]})"),
            "error: chat template line 1, column 7: no filter named 'nofilter'");
}

TEST(JinjaErrors, UnclosedTagsAndBlocks) {
  EXPECT_EQ(render("ok\n  {{ 1 + 2"),
            "error: chat template line 2, column 3: unclosed tag '{{' (missing '}}')");
  EXPECT_EQ(render("{% if true %}\nx"),
            "error: chat template line 1, column 4: unclosed 'if' tag (expected 'elif' or 'else' "
            "or 'endif')");
  EXPECT_EQ(render("a\n{% for x in xs %}{% if x %}{% endfor %}"),
            "error: chat template line 2, column 31: unexpected 'endfor': the 'if' tag at line 2, "
            "column 21 "
            "needs 'elif' or 'else' or 'endif' first");
  EXPECT_EQ(render("{% endif %}"),
            "error: chat template line 1, column 4: unexpected 'endif': no block is open");
  EXPECT_EQ(
      render("{% for x in xs %}"),
      "error: chat template line 1, column 4: unclosed 'for' tag (expected 'endfor' or 'else')");
  EXPECT_EQ(render("x {# unclosed"),
            "error: chat template line 1, column 3: unclosed comment (missing '#}')");
  EXPECT_EQ(render("{% raw %}abc"),
            "error: chat template line 1, column 1: unclosed 'raw' block (missing '{% endraw %}')");
  EXPECT_EQ(render("{{ 'abc }}"),
            "error: chat template line 1, column 4: unterminated string literal");
}

TEST(JinjaErrors, BadSyntax) {
  EXPECT_TRUE(is_error_at(render("{{ }}"), 1, 4));
  EXPECT_TRUE(is_error_at(render("{{ 1 + }}"), 1, 8));
  EXPECT_TRUE(is_error_at(render("{{ 1 2 }}"), 1, 6));
  EXPECT_TRUE(is_error_at(render("{{ (1 }}"), 1, 7));
  EXPECT_TRUE(is_error_at(render("{{ {'a' 1} }}"), 1, 9));
  EXPECT_TRUE(is_error_at(render("{{ x | }}"), 1, 8));
  EXPECT_EQ(render("{{ 1 }"), "error: chat template line 1, column 6: unexpected '}'");
  EXPECT_TRUE(is_error_at(render("{% set %}"), 1, 8));
  EXPECT_TRUE(is_error_at(render("{% for %}{% endfor %}"), 1, 8));
  EXPECT_EQ(render("\n\n  {% foo %}"), "error: chat template line 3, column 6: unknown tag 'foo'");
  EXPECT_EQ(render("{% break %}"),
            "error: chat template line 1, column 4: 'break' outside of a loop");
  EXPECT_EQ(render("{{ 1 ? 2 }}"),
            "error: chat template line 1, column 6: unexpected character '?'");
}

TEST(JinjaErrors, RaiseExceptionNamesItsCall) {
  const char* source =
      "{%- for m in messages -%}\n"
      "  {%- if m.role == 'bad' -%}\n"
      "    {{ raise_exception('Bad role: ' + m.role) }}\n"
      "  {%- endif -%}\n"
      "{%- endfor -%}";
  EXPECT_EQ(render(source, R"({"messages": [{"role": "user"}, {"role": "bad"}]})"),
            "error: chat template line 3, column 8: Bad role: bad");
  EXPECT_EQ(render(source, R"({"messages": [{"role": "user"}]})"), "");
}

TEST(JinjaErrors, RenderErrorsNameThePlace) {
  EXPECT_EQ(
      render("{{ 'a' + 1 }}"),
      "error: chat template line 1, column 8: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(render("x\n {{ 1 / 0 }}"), "error: chat template line 2, column 7: division by zero");
  EXPECT_EQ(render("{{ 'a' < 1 }}"),
            "error: chat template line 1, column 4: comparison not supported between instances of "
            "'str' and 'int'");
  EXPECT_EQ(render("{% for x in 5 %}{% endfor %}"),
            "error: chat template line 1, column 13: 'int' object is not iterable");
  EXPECT_EQ(render("{{ 5() }}"),
            "error: chat template line 1, column 4: 'int' object is not callable");
  EXPECT_EQ(render("{{ 'abc'.upper(1) }}"),
            "error: chat template line 1, column 9: string method() takes no arguments");
  EXPECT_EQ(render("{{ 'x'|trim(1, 2) }}"),
            "error: chat template line 1, column 8: trim() takes at most 1 argument(s) (2 given)");
  EXPECT_EQ(render("{{ x|tojson }}", R"({"x": {"f": 1}})").rfind("{\"f\": 1}", 0), 0u);
  EXPECT_EQ(render("{{ '%s %s' % 1 }}"),
            "error: chat template line 1, column 12: not enough arguments for format string");
}

}  // namespace
}  // namespace lockstep
