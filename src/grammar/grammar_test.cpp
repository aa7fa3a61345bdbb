#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/grammar_test_support.h"
#include "grammar/json_schema.h"
#include "grammar/token_masks.h"

namespace lockstep {
namespace {

using ordered = nlohmann::ordered_json;

bool matches(const Grammar& grammar, const std::string& text) { return testing_support::grammar_matches(grammar, text); }

Grammar schema_grammar(const char* schema) {
  Grammar grammar;
  Expected<int32_t> root = add_json_schema(grammar, ordered::parse(schema));
  EXPECT_TRUE(root.ok()) << (root.ok() ? "" : root.error().message);
  if (root) grammar.set_root(*root);
  return grammar;
}

TEST(GrammarTest, LiteralsChoicesAndRepeats) {
  Grammar grammar;
  const int32_t ab = grammar.choice({grammar.literal("ab"), grammar.literal("abc")});
  grammar.set_root(grammar.sequence({ab, grammar.repeat(grammar.literal("x"), 1, 3)}));
  EXPECT_TRUE(matches(grammar, "abx"));
  EXPECT_TRUE(matches(grammar, "abcxxx"));
  EXPECT_FALSE(matches(grammar, "abcxxxx"));
  EXPECT_FALSE(matches(grammar, "ab"));
  EXPECT_FALSE(matches(grammar, "abd"));
}

TEST(GrammarTest, UnboundedRepeatsDoNotDeepenTheStack) {
  Grammar grammar;
  grammar.set_root(grammar.repeat(grammar.literal("ab"), 0, -1));
  GrammarState state = grammar_start(grammar);
  for (int i = 0; i < 10000; ++i) {
    state = grammar_step(grammar, state, 'a');
    state = grammar_step(grammar, state, 'b');
  }
  ASSERT_TRUE(state.can_end);
  for (const auto& stack : state.stacks) EXPECT_LE(stack.size(), 3u);
}

// Rules that only ever recurse allow no finite text: refused, as a grammar allowing none is.
TEST(GrammarTest, RecursionWithNoWayOutIsRefused) {
  Grammar grammar;
  const int32_t root = grammar.declare();
  grammar.add_alternative(root, {grammar.literal("("), root, grammar.literal(")")});
  grammar.set_root(root);
  EXPECT_NE(grammar_problem(grammar).find("no finite text"), std::string::npos) << grammar_problem(grammar);
  for (const char* schema : {R"({"type": "array", "items": {"$ref": "#"}, "minItems": 1})",
                             R"({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]})"}) {
    const Grammar from_schema = schema_grammar(schema);
    EXPECT_NE(grammar_problem(from_schema).find("no finite text"), std::string::npos) << schema;
  }
  // With a way out it is fine.
  EXPECT_EQ(grammar_problem(schema_grammar(R"({"type": "array", "items": {"$ref": "#"}})")), "");
}

// r0 ::= "(" r1 ")", ..., rN ::= "x": its one text nests N levels. Past kMaxGrammarDepth it is
// refused, below it matched exactly.
TEST(GrammarTest, AShortestTextNestedTooDeepIsRefused) {
  const auto nested = [](int levels) {
    auto grammar = std::make_unique<Grammar>();
    std::vector<int32_t> rules;
    for (int i = 0; i <= levels; ++i) rules.push_back(grammar->declare());
    for (int i = 0; i < levels; ++i)
      grammar->add_alternative(rules[size_t(i)], {grammar->literal("("), rules[size_t(i) + 1], grammar->literal(")")});
    grammar->add_alternative(rules.back(), {grammar->literal("x")});
    grammar->set_root(rules.front());
    return grammar;
  };
  const auto deep = nested(300);
  EXPECT_NE(grammar_problem(*deep).find("nests deeper than"), std::string::npos) << grammar_problem(*deep);
  const auto fits = nested(200);
  EXPECT_EQ(grammar_problem(*fits), "");
  EXPECT_TRUE(matches(*fits, std::string(200, '(') + "x" + std::string(200, ')')));
  EXPECT_FALSE(matches(*fits, std::string(199, '(') + "x" + std::string(199, ')')));
  // A schema whose one value is 127 objects deep.
  ordered defs = ordered::object();
  for (int i = 0; i < 127; ++i)
    defs["d" + std::to_string(i)] = {{"type", "object"},
                                     {"properties", {{"a", {{"$ref", "#/$defs/d" + std::to_string(i + 1)}}}}},
                                     {"required", {"a"}}};
  defs["d127"] = {{"enum", {7}}};
  Grammar schema;
  Expected<int32_t> root = add_json_schema(schema, ordered{{"$defs", defs}, {"$ref", "#/$defs/d0"}});
  ASSERT_TRUE(root.ok()) << root.error().message;
  schema.set_root(*root);
  EXPECT_NE(grammar_problem(schema).find("nests deeper than"), std::string::npos);
}

// Whatever bytes a reply takes, the state it reaches can still finish: no point allows nothing
// more and yet cannot end. Here a walk that opens every bracket it may (some of which need
// five more levels before anything closes) reaches the depth limit, and closes.
TEST(GrammarTest, EveryStateCanStillFinish) {
  Grammar grammar;
  const int32_t value = grammar.declare();
  int32_t five = value;
  for (int i = 0; i < 5; ++i) five = grammar.sequence({grammar.literal("["), five, grammar.literal("]")});
  grammar.add_alternative(value, {grammar.literal("x")});
  grammar.add_alternative(value, {grammar.literal("("), value, grammar.literal(")")});
  grammar.add_alternative(value, {grammar.literal("{"), five, grammar.literal("}")});
  grammar.set_root(value);
  ASSERT_EQ(grammar_problem(grammar), "");
  std::mt19937 random(7);
  size_t deepest = 0;
  for (int walk = 0; walk < 20; ++walk) {
    GrammarState state = grammar_start(grammar);
    std::string text;
    while (!(state.finished() && state.can_end)) {
      std::vector<uint8_t> allowed;
      for (int byte = 0; byte < 256; ++byte) {
        const GrammarState next = grammar_step(grammar, state, uint8_t(byte));
        if (!next.finished() || next.can_end) allowed.push_back(uint8_t(byte));
      }
      ASSERT_FALSE(allowed.empty()) << "stuck after " << text.size() << " bytes: " << text.substr(0, 80);
      // Open while it may (mostly), else take any allowed byte.
      std::vector<uint8_t> openers;
      for (uint8_t byte : allowed)
        if (byte == '(' || byte == '{' || byte == '[') openers.push_back(byte);
      const bool open = !openers.empty() && (walk % 2 == 0 || random() % 8 != 0);  // even walks: always
      const std::vector<uint8_t>& from = open ? openers : allowed;
      const uint8_t byte = from[random() % from.size()];
      text.push_back(char(byte));
      state = grammar_step(grammar, state, byte);
      ASSERT_LT(text.size(), 4000u);
    }
    EXPECT_TRUE(matches(grammar, text));
    deepest = std::max(deepest, text.size());
  }
  EXPECT_GT(deepest, 2 * kMaxGrammarDepth - 20) << "the walks came near the limit";
}

TEST(JsonSchemaGrammar, AcceptsWhatTheSchemaAllowsAndNothingElse) {
  Grammar grammar = schema_grammar(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 4}, "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 2},
      "ok": {"type": ["boolean", "null"]}}, "required": ["name", "ok"], "additionalProperties": false})");
  EXPECT_TRUE(matches(grammar, R"({"name": "ab\"c", "ok": true})"));
  EXPECT_TRUE(matches(grammar, R"({"name":"","age":-12,"tags":["a",3],"ok":null})"));
  EXPECT_TRUE(matches(grammar, R"({"name": "\u00e9x", "tags": [], "ok": false})"));
  EXPECT_FALSE(matches(grammar, R"({"name": "abcde", "ok": true})"));         // too long
  EXPECT_FALSE(matches(grammar, R"({"ok": true})"));                          // name required
  EXPECT_FALSE(matches(grammar, R"({"ok": true, "name": "a"})"));             // schema order
  EXPECT_FALSE(matches(grammar, R"({"name": "a", "age": 1.5, "ok": true})"));  // integer
  EXPECT_FALSE(matches(grammar, R"({"name": "a", "tags": ["c"], "ok": true})"));
  EXPECT_FALSE(matches(grammar, R"({"name": "a", "tags": ["a","b","a"], "ok": true})"));
  EXPECT_FALSE(matches(grammar, R"({"name": "\ud800", "ok": true})"));  // a lone surrogate
  EXPECT_FALSE(matches(grammar, "{\"name\": \"\x01\", \"ok\": true}"));  // a raw control byte
  EXPECT_FALSE(matches(grammar, "{\"name\": \"\xc3\", \"ok\": true}"));   // cut UTF-8
  EXPECT_TRUE(matches(grammar, "{\"name\": \"\xc3\xa9\", \"ok\": true}"));
}

TEST(JsonSchemaGrammar, NumbersRefsAndAnyValues) {
  Grammar grammar = schema_grammar(R"({"$defs": {"node": {"type": "object", "properties": {
      "v": {"type": "number"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
      "required": ["v", "next"]}}, "$ref": "#/$defs/node"})");
  EXPECT_TRUE(matches(grammar, R"({"v": 1.5e-3, "next": {"v": 0, "next": null}})"));
  EXPECT_FALSE(matches(grammar, R"({"v": 01, "next": null})"));
  EXPECT_FALSE(matches(grammar, R"({"v": 1., "next": null})"));
  Grammar any;
  any.set_root(add_json_object(any));
  EXPECT_TRUE(matches(any, R"({"a": [1, {"b": null}, "x"], "c": {}})"));
  EXPECT_FALSE(matches(any, R"([1])"));
  EXPECT_FALSE(matches(any, R"({"a": })"));
}

TEST(JsonSchemaGrammar, RefusesWhatItCannotKeepNamingWhere) {
  auto refusal = [](const char* schema) {
    Grammar grammar;
    Expected<int32_t> root = add_json_schema(grammar, ordered::parse(schema));
    return root.ok() ? std::string("accepted") : root.error().message;
  };
  EXPECT_EQ(refusal(R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "x+"}}})"),
            "schema.properties.a: the keyword \"pattern\" is not supported in structured output");
  EXPECT_EQ(refusal(R"({"type": "integer", "minimum": 0})"),
            "schema: the keyword \"minimum\" is not supported in structured output");
  EXPECT_EQ(refusal(R"({"type": "object", "properties": {}, "required": ["x"]})"),
            "schema.required: names \"x\", which is not in properties");
  EXPECT_EQ(refusal(R"({"$ref": "#/elsewhere"})"),
            "schema.$ref: \"#/elsewhere\" is not \"#\" or a schema under #/$defs or #/definitions");
  EXPECT_EQ(refusal(R"({"type": "decimal"})"), "schema.type: unknown type \"decimal\"");
  EXPECT_EQ(refusal(R"({"type": "string", "maxLength": -1})"), "schema.maxLength: must be a non-negative integer");
  // What would make the lane thread's masks slow: a huge enum, a huge grammar.
  nlohmann::json values = nlohmann::json::array();
  for (int i = 0; i < 5000; ++i) values.push_back(i);
  EXPECT_EQ(refusal(nlohmann::json{{"enum", values}}.dump().c_str()), "schema.enum: more than 4096 values are not supported");
  nlohmann::json properties = nlohmann::json::object();
  for (int i = 0; i < 400; ++i) properties["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 600 + i}};
  EXPECT_EQ(refusal(nlohmann::json{{"type", "object"}, {"properties", properties}}.dump().c_str()),
            "schema: too large a schema (its grammar passes 1048576 elements)");
}

// Shared rules met by many paths (anyOf over one $ref, level after level) cost their distinct
// stacks, not their paths; long runs of optional members can all be skipped; a grammar that
// allows nothing is named as such.
TEST(JsonSchemaGrammar, SharedRulesAndOptionalRunsStayCheapAndWhole) {
  nlohmann::ordered_json defs = nlohmann::ordered_json::object();
  for (int level = 0; level < 15; ++level) {
    const nlohmann::ordered_json next = {{"$ref", "#/$defs/d" + std::to_string(level + 1)}};
    defs["d" + std::to_string(level)] = {{"anyOf", {next, next, next, next}}};
  }
  defs["d15"] = {{"type", "null"}};
  Grammar shared;
  Expected<int32_t> root = add_json_schema(shared, nlohmann::ordered_json{{"$defs", defs}, {"$ref", "#/$defs/d0"}});
  ASSERT_TRUE(root.ok()) << root.error().message;
  shared.set_root(*root);
  EXPECT_EQ(grammar_problem(shared), "");
  EXPECT_TRUE(matches(shared, "null"));

  nlohmann::ordered_json properties = nlohmann::ordered_json::object();
  for (int i = 0; i < 70; ++i) properties["p" + std::to_string(i)] = {{"type", "integer"}};
  Grammar optional;
  root = add_json_schema(optional, nlohmann::ordered_json{{"type", "object"}, {"properties", properties}});
  ASSERT_TRUE(root.ok());
  optional.set_root(*root);
  EXPECT_TRUE(matches(optional, "{}"));
  EXPECT_TRUE(matches(optional, R"({"p69": 1})"));
  EXPECT_TRUE(matches(optional, R"({"p0": 1, "p35": 2, "p69": 3})"));
  // Thousands of optional members in a row: past kMaxSettleDepth the grammar says so, whatever
  // the stack it would take.
  for (int i = 70; i < 5000; ++i) properties["p" + std::to_string(i)] = {{"type", "integer"}};
  Grammar many;
  root = add_json_schema(many, nlohmann::ordered_json{{"type", "object"}, {"properties", properties}});
  ASSERT_TRUE(root.ok());
  many.set_root(*root);
  GrammarState opened = grammar_step(many, grammar_start(many), '{');
  EXPECT_TRUE(opened.truncated);

  Grammar loop;
  root = add_json_schema(loop, ordered::parse(R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})"));
  ASSERT_TRUE(root.ok());
  loop.set_root(*root);
  EXPECT_EQ(grammar_problem(loop).rfind("the grammar can come back to a rule before matching a character", 0), 0u);
  // anyOf through itself: left recursion, which a byte-at-a-time match could not follow.
  Grammar again;
  root = add_json_schema(again, ordered::parse(R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})"));
  ASSERT_TRUE(root.ok());
  again.set_root(*root);
  EXPECT_NE(grammar_problem(again), "");
}

TEST(JsonSchemaGrammar, EnumsAndConstsTakeOnlyATypeBesideThem) {
  EXPECT_TRUE(matches(schema_grammar(R"({"type": "string", "enum": ["a", "b"], "title": "x"})"), R"("b")"));
  Grammar grammar;
  for (const char* schema : {R"({"type": "string", "enum": ["a", 1]})", R"({"enum": ["a"], "maxLength": 3})",
                             R"({"anyOf": [{"type": "object"}], "properties": {"a": {}}})"})
    EXPECT_FALSE(add_json_schema(grammar, ordered::parse(schema)).ok()) << schema;
}

// A vocabulary of single bytes, some pairs and an end id; masks by the trie must equal masks by
// stepping each token's bytes through the grammar one at a time.
// End ids outside the vocabulary (a generation_config.json may list any) are dropped, not written.
TEST(TokenMasksTest, EndIdsOutsideTheVocabularyAreDropped) {
  Vocabulary vocabulary({"a", "b", "c"}, {-1, 2, 200000});
  EXPECT_EQ(vocabulary.end_ids(), std::vector<int32_t>{2});
}

TEST(TokenMasksTest, TrieMasksEqualTokenByTokenChecks) {
  std::vector<std::string> spelled = {"", "{", "}", "\"", "a", "ab", "\"a", "\": ", ",", ":", " ", "1", "12", "-",
                                      "true", "tr", "x\"}", "\\n", "\\", "n", "b", "{\"", "é", "\xc3", "\xa9"};
  const int32_t end_id = int32_t(spelled.size());
  spelled.push_back("");
  auto vocabulary = std::make_shared<Vocabulary>(spelled, std::vector<int32_t>{end_id});
  auto grammar = std::make_shared<Grammar>(schema_grammar(
      R"({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}})"));
  TokenMasks masks(grammar, vocabulary);
  std::mt19937 random(7);
  for (int walk = 0; walk < 40; ++walk) {
    int32_t state = masks.start();
    std::string text;
    for (int step = 0; step < 30; ++step) {
      const std::vector<uint32_t> mask = masks.mask(state);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocabulary->size(); ++id) {
        bool by_bytes = false;
        if (id == end_id) {
          by_bytes = masks.can_end(state);
        } else if (!spelled[size_t(id)].empty()) {
          by_bytes = masks.after_token(state, id) >= 0;
        }
        const bool by_mask = (mask[size_t(id) >> 5] >> (id & 31)) & 1;
        ASSERT_EQ(by_mask, by_bytes) << "token " << id << " at walk " << walk << " step " << step;
        if (by_mask) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty()) << "after: " << text;
      const int32_t pick = allowed[random() % allowed.size()];
      if (pick == end_id) break;
      state = masks.after_token(state, pick);
      text += spelled[size_t(pick)];
    }
  }
}

}  // namespace
}  // namespace lockstep
