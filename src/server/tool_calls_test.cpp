#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/grammar_matcher.h"

namespace lockstep {
namespace {

using ordered = nlohmann::ordered_json;

const ordered kTools = ordered::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}},
    "required": ["city"]}}},
  {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}])");

struct Parsed {
  std::string content;
  std::vector<ToolCall> calls;
};

// Feeds `text` in pieces of `step` bytes.
Parsed parse(ToolFormat format, const std::string& text, size_t step, bool forced = false) {
  ToolCallParser parser(format, kTools, 42, forced);
  Parsed out;
  for (size_t at = 0; at < text.size(); at += step) {
    out.content += parser.push(text.substr(at, step));
    for (ToolCall& call : parser.take()) out.calls.push_back(call);
  }
  out.content += parser.finish();
  for (ToolCall& call : parser.take()) out.calls.push_back(call);
  return out;
}

TEST(ToolCallParser, HermesCallsLeaveTheirTextAndNoMarkup) {
  const std::string reply = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                            "</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1, \\\"b\\\": 2}\"}\n</tool_call>";
  for (size_t step : {1, 3, 1000}) {
    Parsed parsed = parse(ToolFormat::hermes, reply, step);
    EXPECT_EQ(parsed.content, "Let me check.\n\n") << "step " << step;
    ASSERT_EQ(parsed.calls.size(), 2u);
    EXPECT_EQ(parsed.calls[0].name, "get_weather");
    EXPECT_EQ(parsed.calls[0].arguments, R"({"city":"Paris"})");
    EXPECT_EQ(parsed.calls[1].arguments, R"({"a":1,"b":2})");
    EXPECT_EQ(parsed.calls[0].id.size(), 21u);
    EXPECT_NE(parsed.calls[0].id, parsed.calls[1].id);
  }
  // Text that only looks like the start of a call is held back, then sent once it is not one.
  EXPECT_EQ(parse(ToolFormat::hermes, "a <tool_ca", 1).content, "a <tool_ca");
  Parsed broken = parse(ToolFormat::hermes, "x<tool_call>not json</tool_call>y", 2);
  EXPECT_EQ(broken.content, "x<tool_call>not json</tool_call>y");
  EXPECT_TRUE(broken.calls.empty());
  // A call left open at the end still counts when it parses.
  Parsed open = parse(ToolFormat::hermes, "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}", 5);
  EXPECT_EQ(open.content, "");
  ASSERT_EQ(open.calls.size(), 1u);
}

// Calls alone, with the newline a grammar puts between them, have no content in any piece (a
// streamed reply then sends none, as the whole reply has none); whitespace before real text is
// the text's, and a reply of whitespace alone keeps it.
TEST(ToolCallParser, WhitespaceAroundCallsAloneIsNoContent) {
  const std::string call = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>";
  for (size_t step : {1, 4, 1000}) {
    ToolCallParser parser(ToolFormat::hermes, kTools, 7);
    const std::string reply = "\n" + call + "\n" + call + "\n";
    for (size_t at = 0; at < reply.size(); at += step) EXPECT_EQ(parser.push(reply.substr(at, step)), "") << "step " << step;
    EXPECT_EQ(parser.finish(), "");
    EXPECT_EQ(parser.take().size(), 2u);
  }
  EXPECT_EQ(parse(ToolFormat::hermes, "\n " + call + "\nDone.", 3).content, "\n \nDone.");
  EXPECT_EQ(parse(ToolFormat::hermes, " \n", 1).content, " \n");
}

// A reply cut short inside a call (max_tokens) leaves no markup in its content; with a forced
// call (tool_choice "required" or named) nothing of it is content.
TEST(ToolCallParser, ACallCutShortIsNotContent) {
  for (size_t step : {1, 5}) {
    Parsed cut = parse(ToolFormat::hermes, "Checking. <tool_call>\n{\"name\": \"get_weather\", \"argu", step);
    EXPECT_EQ(cut.content, "Checking. ");
    EXPECT_TRUE(cut.calls.empty());
    Parsed forced = parse(ToolFormat::hermes,
                          "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>\n<tool_call>\n{\"",
                          step, true);
    EXPECT_EQ(forced.content, "");
    EXPECT_EQ(forced.calls.size(), 1u);
    EXPECT_EQ(parse(ToolFormat::hermes, "<tool_", step, true).content, "");
    EXPECT_EQ(parse(ToolFormat::llama_json, "{\"name\": \"add\", \"parameters\": {\"a\"", step, true).content, "");
    EXPECT_EQ(parse(ToolFormat::xml, "<tool_call>\n<function=add>\n<parameter=a>\n1", step).content, "");
    EXPECT_TRUE(parse(ToolFormat::xml, "<tool_call>\n<function=add>\n", step).calls.empty());
    // A whole call whose closing tag alone was cut (in part) is a call.
    Parsed closing = parse(ToolFormat::hermes, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_ca",
                           step, true);
    EXPECT_EQ(closing.calls.size(), 1u);
    EXPECT_EQ(closing.content, "");
  }
}

TEST(ToolCallParser, XmlValuesTakeTheirParametersTypes) {
  const std::string reply = "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
                            "<parameter=days>\n3\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n</function>\n</tool_call>";
  for (size_t step : {1, 7}) {
    Parsed parsed = parse(ToolFormat::xml, reply, step);
    EXPECT_EQ(parsed.content, "");
    ASSERT_EQ(parsed.calls.size(), 1u);
    EXPECT_EQ(parsed.calls[0].name, "get_weather");
    EXPECT_EQ(parsed.calls[0].arguments, R"({"city":"New York","days":3,"metric":true})");
  }
}

// A JSON value may hold "</parameter>" in one of its strings: it ends where it parses as its type.
TEST(ToolCallParser, XmlJsonValuesRunPastAParameterTagInAString) {
  const ordered tools = ordered::parse(R"([{"type": "function", "function": {"name": "tag", "parameters": {"type": "object",
    "properties": {"tags": {"type": "array", "items": {"type": "string"}}, "note": {"type": "string"}}}}}])");
  const std::string reply = "<tool_call>\n<function=tag>\n<parameter=tags>\n[\"a</parameter>b\", \"c\"]\n</parameter>\n"
                            "<parameter=note>\nplain\n</parameter>\n</function>\n</tool_call>";
  ToolCallParser parser(ToolFormat::xml, tools, 1);
  EXPECT_EQ(parser.push(reply) + parser.finish(), "");
  std::vector<ToolCall> calls = parser.take();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].arguments, R"({"tags":["a</parameter>b","c"],"note":"plain"})");
}

TEST(ToolCallParser, Llama3JsonIsAWholeReplyCall) {
  Parsed parsed = parse(ToolFormat::llama_json, "<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2.5}}", 4);
  EXPECT_EQ(parsed.content, "");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, R"({"a":1,"b":2.5})");
  // JSON that does not call one of the tools is the reply's text.
  EXPECT_EQ(parse(ToolFormat::llama_json, "{\"name\": \"Alice\", \"age\": 30}", 3).content, "{\"name\": \"Alice\", \"age\": 30}");
  EXPECT_EQ(parse(ToolFormat::llama_json, "{\"name\": \"add\"}", 3).calls.size(), 0u);
  // Plain text is sent as it comes, not held to the end.
  ToolCallParser parser(ToolFormat::llama_json, kTools, 1);
  EXPECT_EQ(parser.push("Hello"), "Hello");
  EXPECT_EQ(parse(ToolFormat::llama_json, "{\"not\": \"a call\"}", 3).content, "{\"not\": \"a call\"}");
}

TEST(ToolCallParser, FormatsAreReadFromTemplates) {
  EXPECT_EQ(tool_format_of("{% for tool in tools %}...<tool_call>\n{\"name\": ...}</tool_call>"), ToolFormat::hermes);
  EXPECT_EQ(tool_format_of("<tool_call>\n<function=example_function_name>\n<parameter=p>"), ToolFormat::xml);
  EXPECT_EQ(tool_format_of("{% if tools %}{\"name\": function name, \"parameters\": dictionary}{% endif %}"),
            ToolFormat::llama_json);
  EXPECT_EQ(tool_format_of("{% for message in messages %}{{ message.content }}{% endfor %}"), ToolFormat::none);
}

// What the grammar of a required call lets through is what the parser reads as calls, with
// arguments of the right shape, in every format.
TEST(ToolCallGrammar, EveryTextItAllowsParsesAsCalls) {
  std::mt19937 random(3);
  for (ToolFormat format : {ToolFormat::hermes, ToolFormat::xml, ToolFormat::llama_json}) {
    for (const char* only : {"", "add"}) {
      auto grammar = tool_call_grammar(format, kTools, only, true);
      ASSERT_TRUE(grammar.ok()) << grammar.error().message;
      for (int walk = 0; walk < 20; ++walk) {
        GrammarState state = grammar_start(**grammar);
        std::string text;
        for (int step = 0; step < 4000 && !(state.can_end && (state.finished() || step > 200)); ++step) {
          std::vector<uint8_t> allowed, closing;
          for (int b = 0; b < 256; ++b) {
            GrammarState next = grammar_step(**grammar, state, uint8_t(b));
            if (next.finished() && !next.can_end) continue;
            allowed.push_back(uint8_t(b));
            if (std::string("\"}<\n0123456789tf").find(char(b)) != std::string::npos) closing.push_back(uint8_t(b));
          }
          ASSERT_FALSE(allowed.empty()) << text;
          const auto& pool = step > 60 && !closing.empty() ? closing : allowed;
          const uint8_t pick = pool[random() % pool.size()];
          text.push_back(char(pick));
          state = grammar_step(**grammar, state, pick);
        }
        ASSERT_TRUE(state.can_end) << text;
        Parsed parsed = parse(format, text, 5);
        EXPECT_EQ(parsed.content.find_first_not_of('\n'), std::string::npos) << text;
        ASSERT_FALSE(parsed.calls.empty()) << text;
        for (const ToolCall& call : parsed.calls) {
          if (*only) {
            EXPECT_EQ(call.name, only);
          }
          ordered arguments = ordered::parse(call.arguments);
          const bool shaped = call.name == "add" ? arguments["a"].is_number() && arguments["b"].is_number()
                                                 : arguments["city"].is_string();
          EXPECT_TRUE(shaped) << text;
        }
      }
    }
  }
  EXPECT_FALSE(tool_call_grammar(ToolFormat::hermes, kTools, "nope", true).ok());
}

// Arguments are always an object; xml string parameters keep their enum and lengths and $refs
// resolve against the tool's parameters; what the markup cannot carry is refused.
TEST(ToolCallGrammar, ParametersAreKeptOrRefused) {
  auto tools = [](const char* parameters) {
    return ordered::parse(std::string(R"([{"type": "function", "function": {"name": "f", "parameters": )") + parameters + "}}]");
  };
  auto allows = [](const std::shared_ptr<Grammar>& grammar, const std::string& text) {
    GrammarState state = grammar_start(*grammar);
    for (char c : text) state = grammar_step(*grammar, state, uint8_t(c));
    return state.can_end;
  };
  auto any = tool_call_grammar(ToolFormat::hermes, tools("{}"), "", false);
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(allows(*any, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(allows(*any, "<tool_call>\n{\"name\": \"f\", \"arguments\": null}\n</tool_call>"));
  EXPECT_FALSE(tool_call_grammar(ToolFormat::hermes, tools(R"({"type": "array"})"), "", false).ok());
  auto xml = tool_call_grammar(ToolFormat::xml, tools(R"({"type": "object", "properties": {
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "at": {"$ref": "#/$defs/place"}},
      "required": ["unit", "at"], "$defs": {"place": {"type": "object", "properties": {"x": {"type": "integer"}},
      "required": ["x"]}}})"), "", false);
  ASSERT_TRUE(xml.ok()) << xml.error().message;
  const std::string call = "<tool_call>\n<function=f>\n<parameter=unit>\ncelsius\n</parameter>\n"
                           "<parameter=at>\n{\"x\": 3}\n</parameter>\n</function>\n</tool_call>";
  EXPECT_TRUE(allows(*xml, call));
  std::string kelvin = call;
  kelvin.replace(kelvin.find("celsius"), 7, "kelvin");
  EXPECT_FALSE(allows(*xml, kelvin));
  // An enum may hold the empty string (a literal of nothing matched nothing, and the grammar was
  // refused as having no finite text).
  auto blank = tool_call_grammar(ToolFormat::xml, tools(R"({"type": "object", "properties": {
      "unit": {"type": "string", "enum": ["", "celsius"]}}, "required": ["unit"]})"), "", false);
  ASSERT_TRUE(blank.ok()) << blank.error().message;
  EXPECT_TRUE(allows(*blank, "<tool_call>\n<function=f>\n<parameter=unit>\n\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(tool_call_grammar(ToolFormat::xml, tools(R"({"properties": {"a>b": {"type": "integer"}}})"), "", false).ok());
  EXPECT_FALSE(tool_call_grammar(ToolFormat::xml, tools(R"({"properties": {"s": {"type": "string", "pattern": "x"}}})"), "", false).ok());
}

}  // namespace
}  // namespace lockstep
