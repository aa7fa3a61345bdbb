// Every text a schema's grammar lets through parses and validates against the schema: random
// walks through the grammar, checked by a small validator of the supported keywords.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"

namespace lockstep {
namespace {

using ordered = nlohmann::ordered_json;

int64_t code_points(const std::string& text) {
  int64_t count = 0;
  for (unsigned char c : text) count += (c & 0xc0) != 0x80;
  return count;
}

// Whether `value` is valid against `schema` (the keywords json_schema.h supports).
bool valid(const nlohmann::json& value, const ordered& schema, const ordered& root) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    if (ref == "#") return valid(value, root, root);
    const std::string name = ref.substr(ref.rfind('/') + 1);
    return valid(value, root.contains("$defs") ? root["$defs"][name] : root["definitions"][name], root);
  }
  if (schema.contains("const") && value != nlohmann::json::parse(schema["const"].dump())) return false;
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& option : schema["enum"]) found = found || value == nlohmann::json::parse(option.dump());
    if (!found) return false;
  }
  if (schema.contains("anyOf")) {
    bool any = false;
    for (const auto& option : schema["anyOf"]) any = any || valid(value, option, root);
    if (!any) return false;
  }
  if (schema.contains("type")) {
    std::vector<std::string> types;
    if (schema["type"].is_string()) types.push_back(schema["type"]);
    else for (const auto& t : schema["type"]) types.push_back(t);
    bool typed = false;
    for (const std::string& t : types)
      typed = typed || (t == "object" && value.is_object()) || (t == "array" && value.is_array()) ||
              (t == "string" && value.is_string()) || (t == "integer" && value.is_number_integer()) ||
              (t == "number" && value.is_number()) || (t == "boolean" && value.is_boolean()) ||
              (t == "null" && value.is_null());
    if (!typed) return false;
  }
  if (value.is_object()) {
    if (schema.contains("required"))
      for (const auto& name : schema["required"])
        if (!value.contains(name.get<std::string>())) return false;
    for (const auto& [name, member] : value.items()) {
      if (schema.contains("properties") && schema["properties"].contains(name)) {
        if (!valid(member, schema["properties"][name], root)) return false;
      } else if (schema.contains("additionalProperties") && !valid(member, schema["additionalProperties"], root)) {
        return false;
      }
    }
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>()) return false;
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>()) return false;
    if (schema.contains("items"))
      for (const auto& item : value)
        if (!valid(item, schema["items"], root)) return false;
  }
  if (value.is_string()) {
    const int64_t length = code_points(value.get<std::string>());
    if (schema.contains("minLength") && length < schema["minLength"].get<int64_t>()) return false;
    if (schema.contains("maxLength") && length > schema["maxLength"].get<int64_t>()) return false;
  }
  return true;
}

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
    EXPECT_TRUE(valid(value, schema, schema)) << text;
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
