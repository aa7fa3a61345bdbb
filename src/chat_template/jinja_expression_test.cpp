// Expressions of the chat-template interpreter: literals, operators, subscripts and slices,
// undefined values, tests, filters and methods. Expected outputs are jinja2's (3.1) with
// transformers' tojson.
#include <gtest/gtest.h>

#include "chat_template/jinja_test_support.h"

namespace lockstep {
namespace {

using testing_jinja::render;

constexpr const char* kData = R"({"s": "Hello, World", "u": "héllo wörld ☃ 😀", "n": 5, "f": 2.5,
  "xs": [3, 1, 2], "e": [], "d": {"b": 1, "a": [1, 2.5, "x"], "n": null, "t": true},
  "messages": [{"role": "system", "content": "Be nice."}, {"role": "user", "content": "Hi"}]})";

TEST(JinjaExpression, Literals) {
  EXPECT_EQ(
      render("{{ \"double\" }} {{ 'single \\' quote' }} {{ 'tab\\there' }} {{ 'uni\\u00e9' }} "
             "{{ 'x\\x41' }} {{ 'adj' 'acent' }} {{ 'back\\\\slash' }} {{ 'unknown\\d' }}"),
      "double single ' quote tab\there unié xA adjacent back\\slash unknown\\d");
  EXPECT_EQ(render("{{ [1, 2, ] }} {{ {'a': 1, } }} {{ (1, ) }} {{ () }} {{ True }}{{ None }}"),
            "[1, 2] {'a': 1} (1,) () TrueNone");
  EXPECT_EQ(
      render("{{ 1e3 }} {{ 1_000 }} {{ 1.5e-3 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} "
             "{{ 1/3 }} {{ -0.0 }} {{ 0.1 + 0.2 }}"),
      "1000.0 1000 0.0015 1e+16 1000000000000000.0 0.0001 1e-05 0.3333333333333333 -0.0 "
      "0.30000000000000004");
}

TEST(JinjaExpression, Arithmetic) {
  EXPECT_EQ(
      render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} "
             "{{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** 3 ** 2 }} {{ 1.5 + 1 }} {{ 7.5 // 2 }} {{ -7.5 % "
             "2 }}"),
      "7 9 3.5 3 -4 1 2 1024 64 2.5 3.0 0.5");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ true ~ [1] ~ missing }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ "
                   "[1] + [2] }}"),
            "a1NoneTrue[1] ababab [1, 1] [1, 2]");
  EXPECT_EQ(render("{{ -n }} {{ -n|abs }} {{ - 2 ** 2 }} {{ +n }} {{ true + 1 }}", kData),
            "-5 5 4 5 2");
  EXPECT_EQ(render("{{ '%d items, %s' % (n, 'ok') }} {{ '%5.2f|%-4d|%03d|%x|%#x' % (3.14159, 42, "
                   "7, 255, 255) }} "
                   "{{ '%(a)s' % {'a': 'x'} }} {{ 'x=%s'|format(3) }}",
                   kData),
            "5 items, ok  3.14|42  |007|ff|0xff x x=3");
}

TEST(JinjaExpression, ComparisonsAndLogic) {
  EXPECT_EQ(
      render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} "
             "{{ true == 1 }} {{ none == none }} {{ [1, 2] == (1, 2) }}"),
      "True False True True True True True False");
  EXPECT_EQ(
      render(
          "{{ 'a' in 'cat' }} {{ 2 in xs }} {{ 'a' in d }} {{ 'z' not in d }} {{ not 'a' in d }} "
          "{{ 'x' in missing }}",
          kData),
      "True True True True False False");
  EXPECT_EQ(render("{{ true and 'x' }} {{ false or 'y' }} {{ 0 or '' }}|{{ none and 1 }} {{ not "
                   "none }} {{ not 1 }}"),
            "x y |None True False");
  EXPECT_EQ(render("{{ 'yes' if n > 3 else 'no' }} {{ 'yes' if n > 10 }}|{{ 'a' if false else 'b' "
                   "if false else 'c' }}",
                   kData),
            "yes |c");
}

TEST(JinjaExpression, SubscriptsAndSlices) {
  EXPECT_EQ(render("{{ s[0] }}{{ s[-1] }} {{ s[1:4] }} {{ s[::-1] }} {{ s[::2] }} {{ s[-5:] }} {{ "
                   "s[:100] }} {{ s[7:2:-1] }}",
                   kData),
            "Hd ell dlroW ,olleH Hlo ol World Hello, World W ,ol");
  EXPECT_EQ(render("{{ u[0] }}{{ u[-1] }} {{ u[1:3] }} {{ u|length }} {{ u[::-1] }}", kData),
            "h😀 él 15 😀 ☃ dlröw olléh");
  EXPECT_EQ(
      render("{{ xs[0] }}{{ xs[-1] }} {{ xs[1:] }} {{ xs[::-1] }} {{ xs[10] }}|{{ xs.0 }}", kData),
      "32 [1, 2] [2, 1, 3] |3");
  EXPECT_EQ(
      render("{{ messages[0].role }} {{ messages[0]['content'] }} {{ messages[::-1][0].role }} "
             "{{ d['a'][1] }} {{ d.a.2 }} {{ d.zz }}|{{ d['zz'] }}|",
             kData),
      "system Be nice. user 2.5 x ||");
}

TEST(JinjaExpression, UndefinedBehavesAsJinja2Default) {
  EXPECT_EQ(
      render(
          "[{{ missing }}] {{ missing is defined }} {{ missing is undefined }} {{ not missing }} "
          "{{ missing|length }} {{ missing|default('dflt') }} {{ missing|trim }}| {{ missing|list "
          "}} "
          "{{ missing == none }} {{ missing is iterable }}"),
      "[] False True True 0 dflt | [] False True");
  EXPECT_EQ(render("{{ d.zz is defined }} {{ d.n is none }} {{ d.n is defined }}", kData),
            "False True True");
  // Using an undefined value (arithmetic, attribute or item of it, a call) is an error.
  EXPECT_EQ(render("{{ missing + 1 }}"),
            "error: chat template line 1, column 12: 'missing' is undefined");
  EXPECT_EQ(render("{{ missing.x }}"),
            "error: chat template line 1, column 11: 'missing' is undefined");
  EXPECT_EQ(render("{{ d.zz.yy }}", kData),
            "error: chat template line 1, column 8: 'dict object' has no attribute 'zz'");
  EXPECT_EQ(render("{{ missing() }}"),
            "error: chat template line 1, column 4: 'missing' is undefined");
}

TEST(JinjaExpression, Tests) {
  EXPECT_EQ(
      render("{{ n is defined }} {{ s is string }} {{ n is number }} {{ f is float }} {{ n is "
             "integer }} "
             "{{ true is integer }} {{ true is number }} {{ d is mapping }} {{ xs is iterable }} "
             "{{ s is sequence }} {{ none is mapping }} {{ d.t is true }} {{ 1 is true }} {{ false "
             "is false }}",
             kData),
      "True True True True True False True True True True False True False True");
  EXPECT_EQ(render("{{ n is even }} {{ n is odd }} {{ n is divisibleby(5) }} {{ 3 is in xs }} {{ n "
                   "is eq 5 }} "
                   "{{ n is not eq 5 }} {{ n is gt 3 }} {{ 'abc' is lower }} {{ 'ABC' is upper }} "
                   "{{ not n is defined }}",
                   kData),
            "False True True True True False True True True False");
}

TEST(JinjaExpression, StringFilters) {
  EXPECT_EQ(
      render("{{ s|upper }} {{ s|lower }} {{ 'hello world'|title }} {{ 'hello World'|capitalize }} "
             "[{{ '  x \\n'|trim }}] {{ 'xxaxx'|trim('x') }} {{ s|replace('l', 'L') }} {{ "
             "s|replace('l', 'L', 1) }}",
             kData),
      "HELLO, WORLD hello, world Hello World Hello world [x] a HeLLo, WorLd HeLlo, World");
  EXPECT_EQ(render("{{ u|upper }} {{ 'straße'|title }}", kData), "HÉLLO WÖRLD ☃ 😀 Straße");
  EXPECT_EQ(render("{{ 'line1\\nline2\\n\\nline4'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a b  "
                   "c'|wordcount }}"),
            "line1\n    line2\n\n    line4|  a\n  b|3");
  EXPECT_EQ(
      render(
          "{{ s|length }} {{ '<a href=\"x\">&</a>'|e }} {{ n|string ~ 'x' }} {{ 'x'|center(5) }}|",
          kData),
      "12 &lt;a href=&#34;x&#34;&gt;&amp;&lt;/a&gt; 5x   x  |");
}

TEST(JinjaExpression, SequenceFilters) {
  EXPECT_EQ(render("{{ xs|first }} {{ xs|last }} {{ s|first }} [{{ e|first }}] {{ xs|join(',') }} "
                   "{{ xs|join }} "
                   "{{ messages|map(attribute='role')|join('/') }} {{ xs|length }} {{ d|length }}",
                   kData),
            "3 2 H [] 3,1,2 312 system/user 3 4");
  EXPECT_EQ(render("{{ xs|sort }} {{ xs|sort(reverse=true) }} {{ ['b', 'A', 'c']|sort }} "
                   "{{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [1, 2, 1, 3]|unique|list }} "
                   "{{ xs|reverse|list }} {{ s|reverse }}",
                   kData),
            "[1, 2, 3] [3, 2, 1] ['A', 'b', 'c'] ['A', 'b', 'c'] [1, 2, 3] [2, 1, 3] dlroW ,olleH");
  EXPECT_EQ(
      render("{{ xs|sum }} {{ xs|min }} {{ xs|max }} {{ xs|map('string')|join('-') }} "
             "{{ xs|select('odd')|list }} {{ xs|reject('odd')|list }} "
             "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} "
             "{{ range(5)|batch(2)|list }}",
             kData),
      "6 1 3 3-1-2 [3, 1] [2] ['Hi'] [[0, 1], [2, 3], [4]]");
  EXPECT_EQ(
      render("{{ d|items|list }} {{ d|dictsort }} {{ range(3)|list }} {{ range(1, 10, 3)|list }}",
             R"({"d": {"b": 1, "a": 2}})"),
      "[('b', 1), ('a', 2)] [('a', 2), ('b', 1)] [0, 1, 2] [1, 4, 7]");
}

TEST(JinjaExpression, NumberFilters) {
  EXPECT_EQ(
      render("{{ '3'|int + 1 }} {{ '3.7'|int }} {{ 'x'|int }} {{ '2.5'|float }} {{ 3|float }} "
             "{{ 2.567|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ 5|round }} {{ -3|abs }} "
             "{{ 1.25|round(1, 'floor') }} {{ 12345|round(-2) }}"),
      "4 3 0 2.5 3.0 2.57 2.0 4.0 5 3 1.2 12300");
}

TEST(JinjaExpression, DefaultFilter) {
  EXPECT_EQ(
      render(
          "{{ missing|default('dflt') }} [{{ ''|default('dflt') }}] {{ ''|default('dflt', true) }} "
          "{{ 5|default(1) }} {{ missing|d('x') }}"),
      "dflt [] dflt 5 x");
}

TEST(JinjaExpression, ToJsonAsTransformers) {
  const char* data =
      R"({"d": {"b": 1, "a": [1, 2.5, "x"], "n": null, "t": true}, "u": "héllo ☃ 😀"})";
  EXPECT_EQ(render("{{ d|tojson }}", data),
            R"({"b": 1, "a": [1, 2.5, "x"], "n": null, "t": true})");
  EXPECT_EQ(render("{{ d|tojson(indent=2) }}", data),
            "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2.5,\n    \"x\"\n  ],\n  \"n\": null,\n  "
            "\"t\": true\n}");
  EXPECT_EQ(render("{{ u|tojson }} {{ u|tojson(ensure_ascii=true) }}", data),
            R"("héllo ☃ 😀" "h\u00e9llo \u2603 \ud83d\ude00")");
  EXPECT_EQ(
      render("{{ d|tojson(sort_keys=true) }} {{ d|tojson(separators=(',', ':')) }}", data),
      R"({"a": [1, 2.5, "x"], "b": 1, "n": null, "t": true} {"b":1,"a":[1,2.5,"x"],"n":null,"t":true})");
  EXPECT_EQ(
      render("{{ 'a\"b\\\\c\\n\\t</script>'|tojson }} {{ 1.0|tojson }} {{ [1e100, 1e-7]|tojson }} "
             "{{ {}|tojson(indent=2) }} {{ (1, 2)|tojson }}"),
      R"("a\"b\\c\n\t</script>" 1.0 [1e+100, 1e-07] {} [1, 2])");
}

TEST(JinjaExpression, StringMethods) {
  EXPECT_EQ(
      render("{{ s.startswith('Hell') }} {{ s.endswith('ld') }} {{ s.startswith(('x', 'H')) }} "
             "{{ s.split(', ') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} "
             "{{ 'a,b,c'.rsplit(',', 1) }} {{ s.find('o') }} {{ u.find('w') }} {{ s.rfind('o') }} "
             "{{ s.count('l') }}",
             kData),
      "True True True ['Hello', 'World'] ['a', 'b'] ['a', 'b,c'] ['a,b', 'c'] 4 6 8 3");
  EXPECT_EQ(
      render("{{ '-'.join(['a', 'b']) }} {{ s.upper() }} {{ s.replace('World', 'There') }} "
             "[{{ '  x '.strip() }}] {{ 'xyx'.strip('x') }} [{{ '\\n\\nx\\n'.lstrip('\\n') }}] "
             "{{ 'ab12'.isalnum() }} {{ '12'.isdigit() }} {{ 'abc'.removeprefix('a') }} "
             "{{ 'a\\nb'.splitlines() }}",
             kData),
      "a-b HELLO, WORLD Hello, There [x] y [x\n] True True bc ['a', 'b']");
  EXPECT_EQ(render("{{ '</think>' in c }} {{ c.split('</think>')[-1].lstrip('\\n') }}|"
                   "{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
                   R"({"c": "<think>\nhmm\n</think>\n\nHello!"})"),
            "True Hello!|hmm");
}

TEST(JinjaExpression, DictMethodsAndGlobals) {
  EXPECT_EQ(render("{{ d.keys()|list }} {{ d.values()|list }} {{ d.get('b') }} {{ d.get('zz') }} "
                   "{{ d.get('zz', 7) }} "
                   "{{ dict(a=1, b='x') }} {{ namespace(a=1).a }}",
                   R"({"d": {"b": 1, "a": 2}})"),
            "['b', 'a'] [1, 2] 1 None 7 {'a': 1, 'b': 'x'} 1");
  EXPECT_EQ(render("{{ strftime_now('%Y')|length }}"), "4");
}

}  // namespace
}  // namespace lockstep
