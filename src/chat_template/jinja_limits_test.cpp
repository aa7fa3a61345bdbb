// No template can hold a core or fill memory: a render has a step budget, an output limit and
// a cancel check, and no single string may pass 64 MiB. Each case here hung the server, or ran
// it out of memory, before these limits.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "chat_template/chat_template.h"
#include "chat_template/jinja_test_support.h"

namespace lockstep {
namespace {

using testing_jinja::render;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(JinjaLimits, NestedLoopsRunOutOfStepsInsteadOfHanging) {
  EXPECT_EQ(RenderLimits{}.max_steps, 10'000'000);
  auto parsed = ChatTemplate::parse("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(parsed.ok());
  RenderLimits limits;
  limits.max_steps = 1'000'000;  // the default's behaviour, in a tenth of the time
  auto start = Clock::now();
  auto rendered = parsed->render(nlohmann::json::object(), limits);
  ASSERT_FALSE(rendered.ok());
  EXPECT_TRUE(contains(rendered.error().message, "more than 1000000 steps")) << rendered.error().message;
  EXPECT_LT(seconds_since(start), 30.0);
}

TEST(JinjaLimits, OutputPastTheLimitFails) {
  auto parsed = ChatTemplate::parse("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}");
  ASSERT_TRUE(parsed.ok());
  RenderLimits limits;
  limits.max_output_bytes = 10 << 20;
  auto rendered = parsed->render(nlohmann::json::object(), limits);
  ASSERT_FALSE(rendered.ok());
  EXPECT_TRUE(contains(rendered.error().message, "wrote more than 10485760 bytes")) << rendered.error().message;
  // The same bound holds for text captured in a block.
  auto captured = ChatTemplate::parse("{% set s %}{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}{% endset %}");
  ASSERT_TRUE(captured.ok());
  EXPECT_FALSE(captured->render(nlohmann::json::object(), limits).ok());
}

TEST(JinjaLimits, StringsThatWouldPass64MiBFailBeforeTheyAreMade) {
  for (const char* source : {
           "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
           "{{ 'x' | center(1000000000000) }}",
           "{{ 'x' | indent(1000000000000, true) }}",
           "{{ {'a': 1} | tojson(indent=1000000000000) }}",
           "{{ '%1000000000000d' % 5 }}",
           "{% set s = 'a' * 40000000 %}{{ s.replace('aaaa', 'aaaaaaaa') }}",
           "{% set s = 'a' * 40000000 %}{{ [s, s] | join('') }}",
           "{% set s = 'a' * 40000000 %}{{ s + s }}",
       }) {
    std::string out = render(source);
    EXPECT_TRUE(out.rfind("error: ", 0) == 0) << source << " gave " << out.size() << " bytes";
  }
}

// A list that holds another twice, 40 deep, is 2^40 items when written out: its text fails at
// the limit while it is being written (it took gigabytes before), and comparing it with itself
// does not walk it.
TEST(JinjaLimits, AListHeldTwiceAtEachLevelFailsWhileItIsWritten) {
  const std::string build = "{% set ns = namespace(a=[]) %}{% for i in range(40) %}{% set ns.a = [ns.a, ns.a] %}{% endfor %}";
  for (const char* show : {"{{ ns.a | tojson }}", "{{ ns.a }}", "{{ ns.a | string }}", "{{ ns.a | tojson(indent=2) }}"}) {
    const auto start = Clock::now();
    const std::string out = render(build + show);
    EXPECT_TRUE(out.rfind("error: ", 0) == 0) << show << " gave " << out.size() << " bytes";
    EXPECT_LT(seconds_since(start), 20.0) << show;
  }
  EXPECT_EQ(render(build + "{{ ns.a == ns.a }}"), "True");
  // Two such lists, not one held twice, compared: the walk stops at its budget of items.
  const std::string pair = "{% set ns = namespace(l=[1], m=[1]) %}{% for i in range(60) %}"
                           "{% set ns.l = [ns.l, ns.l] %}{% set ns.m = [ns.m, ns.m] %}{% endfor %}";
  for (const char* walk : {"{{ ns.l == ns.m }}", "{{ ns.l < ns.m }}", "{{ ns.l in [ns.m] }}"}) {
    const auto start = Clock::now();
    const std::string out = render(pair + walk);
    EXPECT_TRUE(out.rfind("error: ", 0) == 0) << walk << " gave " << out;
    EXPECT_LT(seconds_since(start), 20.0) << walk;
  }
}

// A list nested 30,000 deep overflowed the stack when written or compared: now an error.
TEST(JinjaLimits, AListNestedPastTheWalkDepthIsAnError) {
  const std::string build = "{% set ns = namespace(l=[], m=[]) %}{% for i in range(30000) %}"
                            "{% set ns.l = [ns.l] %}{% set ns.m = [ns.m] %}{% endfor %}";
  for (const char* show : {"{{ ns.l | tojson }}", "{{ ns.l }}", "{{ ns.l == ns.m }}"}) {
    const std::string out = render(build + show);
    EXPECT_NE(out.find("nested deeper than 1000 levels"), std::string::npos) << show << " gave " << out.substr(0, 200);
  }
  EXPECT_EQ(render("{% set ns = namespace(l=[]) %}{% for i in range(50) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l | tojson | length }}"),
            "102");
}

// Integer arithmetic a CPU traps on, or that would wrap, is a template error like any overflow.
TEST(JinjaLimits, IntegerOverflowIsAnErrorNeverATrapOrAWrap) {
  for (const char* source : {"{{ (-9223372036854775807 - 1) // -1 }}", "{{ -(-9223372036854775807 - 1) }}",
                             "{{ (-9223372036854775807 - 1) | abs }}", "{{ 1e300 | int }}",
                             "{{ '99999999999999999999' | int }}", "{{ 3 ** 64 }}", "{{ 9223372036854775807 + 1 }}"}) {
    const std::string out = render(source);
    EXPECT_EQ(out.rfind("error: ", 0), 0u) << source << " gave " << out;
    EXPECT_NE(out.find("integer overflow"), std::string::npos) << source << " gave " << out;
  }
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) % -1 }}"), "0");
  EXPECT_EQ(render("{{ 7 // -1 }} {{ -7 // 2 }} {{ 7 % -1 }}"), "-7 -4 0");
  const auto start = Clock::now();
  EXPECT_EQ(render("{{ 1 ** 9223372036854775807 }} {{ (-1) ** 9223372036854775807 }} {{ 2 ** 62 }}"),
            "1 -1 4611686018427387904");
  EXPECT_LT(seconds_since(start), 1.0) << "a power by squaring, not by a loop of its exponent";
}

TEST(JinjaLimits, ACancelledRenderStops) {
  auto parsed = ChatTemplate::parse("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(parsed.ok());
  std::atomic<int> asked{0};
  RenderLimits limits;
  limits.cancelled = [&] { return ++asked > 3; };
  auto start = Clock::now();
  auto rendered = parsed->render(nlohmann::json::object(), limits);
  ASSERT_FALSE(rendered.ok());
  EXPECT_TRUE(contains(rendered.error().message, "cancelled")) << rendered.error().message;
  EXPECT_LT(seconds_since(start), 1.0);
}

TEST(JinjaLimits, OrdinaryTemplatesStayWellInsideTheBudget) {
  // A long conversation through a real-sized loop: nowhere near the limits.
  std::string out = render("{% for m in range(20000) %}<|user|>{{ m }}\n{% endfor %}");
  EXPECT_FALSE(out.rfind("error: ", 0) == 0) << out.substr(0, 200);
}

}  // namespace
}  // namespace lockstep
