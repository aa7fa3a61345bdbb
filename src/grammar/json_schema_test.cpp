// Every text a schema's grammar lets through parses and validates against the schema: random
// walks through the grammar, checked by a small validator of the supported keywords.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/schema_test_support.h"

namespace lockstep {
namespace {

using ordered = nlohmann::ordered_json;

// A random text the grammar allows: random allowed bytes, drawn towards closing ones as it grows.
std::string random_text(const Grammar& grammar, std::mt19937& random) {
  GrammarState state = grammar_start(grammar);
  std::string text;
  for (int step = 0; step < 20000; ++step) {
    if (state.can_end && (state.finished() || step > 30 || random() % 4 == 0)) return text;
    std::vector<uint8_t> allowed, closing;
    for (int b = 0; b < 256; ++b) {
      GrammarState next = grammar_step(grammar, state, uint8_t(b));
      if (next.finished() && !next.can_end) continue;
      allowed.push_back(uint8_t(b));
      if (b == '"' || b == '}' || b == ']' || b == 'n' || (b >= '0' && b <= '9')) closing.push_back(uint8_t(b));
    }
    if (allowed.empty()) break;
    const auto& pool = step > 40 && !closing.empty() ? closing : allowed;
    const uint8_t pick = pool[random() % pool.size()];
    text.push_back(char(pick));
    state = grammar_step(grammar, state, pick);
  }
  ADD_FAILURE() << "no end after: " << text;
  return text;
}

class SchemaWalks : public ::testing::TestWithParam<const char*> {};

TEST_P(SchemaWalks, EveryTextParsesAndValidates) {
  const ordered schema = ordered::parse(GetParam());
  Grammar grammar;
  Expected<int32_t> root = add_json_schema(grammar, schema);
  ASSERT_TRUE(root.ok()) << root.error().message;
  grammar.set_root(*root);
  std::mt19937 random(11);
  for (int walk = 0; walk < 60; ++walk) {
    const std::string text = random_text(grammar, random);
    nlohmann::json value;
    ASSERT_NO_THROW(value = nlohmann::json::parse(text)) << text;
    EXPECT_TRUE(testing_support::valid_against(value, schema, schema)) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schemas, SchemaWalks,
    ::testing::Values(
        R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
            "score": {"type": "number"}}, "required": ["name", "age"], "additionalProperties": false})",
        R"({"type": "object", "properties": {"kind": {"enum": ["cat", "dog", null, 7]},
            "pets": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 3}},
            "required": ["id", "tags"]}, "maxItems": 4}}, "required": ["kind", "pets"]})",
        R"({"anyOf": [{"type": "string", "minLength": 2}, {"type": "array", "items": {"type": ["integer", "null"]}},
            {"const": {"fixed": [1, "two"]}}]})",
        R"({"definitions": {"tree": {"type": "object", "properties": {"label": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/definitions/tree"}, "maxItems": 2}},
            "required": ["label"], "additionalProperties": false}}, "$ref": "#/definitions/tree"})",
        R"({"type": "object", "additionalProperties": {"type": "boolean"}})",
        R"({"type": "object"})", R"(true)"));

}  // namespace
}  // namespace lockstep
