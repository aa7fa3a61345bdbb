// Structured output end to end: response_format through HTTP on a model with random weights,
// so only the grammar keeps the replies in shape. Every reply parses and validates against its
// schema, streamed replies equal whole ones, concurrent ones equal their alone runs, and what
// the grammar cannot keep is refused by name.
#include <gtest/gtest.h>


#include <future>
#include <nlohmann/json.hpp>

#include "grammar/schema_test_support.h"
#include "grammar/token_masks.h"
#include "text_server.h"

namespace lockstep {
namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

const char* const kSchemas[] = {
    R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
        "score": {"type": "number"}}, "required": ["name", "age", "score"], "additionalProperties": false})",
    R"({"type": "object", "properties": {"kind": {"enum": ["cat", "dog", "bird"]}, "pets": {"type": "array",
        "items": {"type": "object", "properties": {"id": {"type": "integer"}, "tags": {"type": "array",
        "items": {"type": "string", "maxLength": 4}, "maxItems": 2}}, "required": ["id", "tags"]}, "maxItems": 2}},
        "required": ["kind", "pets"]})",
    R"({"type": "object", "properties": {"quote": {"type": "string", "minLength": 3, "maxLength": 10},
        "ok": {"type": ["boolean", "null"]}}, "required": ["quote", "ok"]})",
    R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [
        {"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}}, "$ref": "#/$defs/node"})"};

json schema_request(const char* schema, int seed) {
  return {{"messages", {{{"role", "user"}, {"content", "describe it"}}}},
          {"max_tokens", 400},
          {"temperature", 1.0},
          {"seed", seed},
          {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "it"}, {"schema", json::parse(schema)}, {"strict", true}}}}}};
}

TEST_F(TextServer, JsonSchemaRepliesParseAndValidate) {
  for (const char* schema : kSchemas) {
    for (int seed = 1; seed <= 3; ++seed) {
      json reply = post("/v1/chat/completions", schema_request(schema, seed));
      const std::string content = reply["choices"][0]["message"]["content"];
      EXPECT_EQ(reply["choices"][0]["finish_reason"], "stop") << content;
      json value = json::parse(content, nullptr, false);
      ASSERT_FALSE(value.is_discarded()) << "not JSON: " << content;
      EXPECT_TRUE(testing_support::valid_against(value, ordered::parse(schema), ordered::parse(schema)))
          << content << "\nagainst " << schema;
    }
  }
}

TEST_F(TextServer, JsonObjectRepliesAreObjectsAndMembersKeepTheSchemasOrder) {
  json body = schema_request(kSchemas[0], 5);
  body["response_format"] = {{"type", "json_object"}};
  body["max_tokens"] = 60;
  json reply = post("/v1/chat/completions", body);
  const std::string content = reply["choices"][0]["message"]["content"];
  ASSERT_FALSE(content.empty());
  EXPECT_EQ(content[0], '{');
  if (reply["choices"][0]["finish_reason"] == "stop") {
    EXPECT_TRUE(json::parse(content, nullptr, false).is_object()) << content;
  }
  // "name" comes first as the schema lists it, though a sorted parse would put "age" first.
  ordered in_order = {{"messages", {{{"role", "user"}, {"content", "describe it"}}}}, {"max_tokens", 100}, {"seed", 6},
                      {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", ordered::parse(kSchemas[0])}}}}}};
  HttpReply sent = http_request(server->port(), "POST", "/v1/chat/completions", in_order.dump());
  ASSERT_EQ(sent.status, 200) << sent.body;
  const std::string ordered_reply = json::parse(sent.body)["choices"][0]["message"]["content"];
  EXPECT_EQ(ordered_reply.rfind("{\"name\":", 0), 0u) << ordered_reply;
}

TEST_F(TextServer, ConstrainedRepliesAreTheSameAloneConcurrentAndStreamed) {
  std::vector<json> bodies;
  for (int i = 0; i < 6; ++i) bodies.push_back(schema_request(kSchemas[size_t(i) % 4], 40 + i));
  bodies[5].erase("response_format");  // a free stream beside them
  std::vector<std::string> alone;
  for (const json& body : bodies) alone.push_back(post("/v1/chat/completions", body)["choices"][0]["message"]["content"]);
  std::vector<std::future<std::string>> together;
  for (const json& body : bodies)
    together.push_back(std::async(std::launch::async, [&, body] {
      return post("/v1/chat/completions", body)["choices"][0]["message"]["content"].get<std::string>();
    }));
  for (size_t i = 0; i < bodies.size(); ++i) EXPECT_EQ(together[i].get(), alone[i]) << "request " << i;
  std::string finish;
  EXPECT_EQ(streamed_text("/v1/chat/completions", bodies[1], &finish), alone[1]);
  EXPECT_EQ(finish, "stop");
}

TEST_F(TextServer, WhatAGrammarCannotKeepIsRefusedByName) {
  auto refusal = [&](json format) {
    json body = schema_request(kSchemas[0], 1);
    body["response_format"] = format;
    HttpReply reply = http_request(server->port(), "POST", "/v1/chat/completions", body.dump());
    EXPECT_EQ(reply.status, 400) << reply.body;
    json error = json::parse(reply.body)["error"];
    EXPECT_EQ(error["param"], "response_format");
    return error["message"].get<std::string>();
  };
  EXPECT_EQ(refusal({{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "integer"}, {"minimum", 3}}}}}}),
            "response_format.json_schema.schema: the keyword \"minimum\" is not supported in structured output");
  EXPECT_EQ(refusal({{"type", "xml"}}), "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
  EXPECT_EQ(refusal({{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "object"}}}, {"strict", "yes"}}}}),
            "'response_format.json_schema.strict' must be a boolean");
  EXPECT_EQ(refusal({{"type", "json_object"}, {"schema", json::object()}}),
            "'response_format.schema' is not a field of a json_object response_format");
  EXPECT_EQ(refusal(json::parse(R"({"type": "json_schema", "json_schema": {"schema": {"properties": {"a": {"format": "email"}}}}})")),
            "response_format.json_schema.schema.properties.a: the keyword \"format\" is not supported in structured output");
}

// llama.cpp's `grammar` (GBNF), on both endpoints: every reply keeps to it, the same alone and
// beside other streams; a bad grammar is a 400 that says where.
TEST_F(TextServer, GbnfGrammarsConstrainRepliesOnBothEndpoints) {
  const std::string gbnf = "root ::= answer (\", \" answer){2}\nanswer ::= \"yes\" | \"no\" | [0-9]{1,3}\n";
  // What the grammar allows: three answers split by ", " (std::regex trips GCC 12's warnings).
  auto kept = [](const std::string& text) {
    size_t parts = 0, at = 0;
    for (;;) {
      const size_t comma = text.find(", ", at);
      const std::string answer = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      const bool digits = !answer.empty() && answer.size() <= 3 &&
                          answer.find_first_not_of("0123456789") == std::string::npos;
      if (answer != "yes" && answer != "no" && !digits) return false;
      ++parts;
      if (comma == std::string::npos) return parts == 3;
      at = comma + 2;
    }
  };
  std::vector<json> bodies;
  for (int i = 0; i < 4; ++i)
    bodies.push_back({{"prompt", "answer " + std::to_string(i)}, {"grammar", gbnf}, {"max_tokens", 60},
                      {"temperature", 1.0}, {"seed", 9 + i}});
  std::vector<std::string> alone;
  for (const json& body : bodies) {
    json reply = post("/v1/completions", body);
    alone.push_back(reply["choices"][0]["text"]);
    EXPECT_TRUE(kept(alone.back())) << alone.back();
    EXPECT_EQ(reply["choices"][0]["finish_reason"], "stop");
  }
  std::vector<std::future<std::string>> together;
  for (const json& body : bodies)
    together.push_back(std::async(std::launch::async, [&, body] {
      return post("/v1/completions", body)["choices"][0]["text"].get<std::string>();
    }));
  for (size_t i = 0; i < bodies.size(); ++i) EXPECT_EQ(together[i].get(), alone[i]) << "request " << i;
  json chat = {{"messages", {{{"role", "user"}, {"content", "answer"}}}}, {"grammar", gbnf}, {"max_tokens", 60}};
  const std::string content = post("/v1/chat/completions", chat)["choices"][0]["message"]["content"];
  EXPECT_TRUE(kept(content)) << content;

  auto refused = [&](json body) {
    HttpReply reply = http_request(server->port(), "POST", "/v1/completions", body.dump());
    EXPECT_EQ(reply.status, 400) << reply.body;
    json error = json::parse(reply.body)["error"];
    EXPECT_EQ(error["param"], "grammar") << reply.body;
    return error["message"].get<std::string>();
  };
  EXPECT_EQ(refused({{"prompt", "x"}, {"grammar", "root ::= \"a\"\nroot ::= b"}}),
            "grammar: line 2, column 1: the rule 'root' is defined twice");
  EXPECT_EQ(refused({{"prompt", "x"}, {"grammar", 5}}), "'grammar' must be a string (GBNF)");
  EXPECT_EQ(refused({{"prompt", "x"}, {"grammar", gbnf}, {"response_format", {{"type", "json_object"}}}}),
            "'grammar' cannot go with a 'response_format' that constrains the reply");
  // 100,000 alternatives: the first token's mask alone would hold the lane thread up for long.
  std::string wide = "root ::= \"a\"";
  for (int i = 1; i < 100000; ++i) wide += "|\"a\"";
  EXPECT_EQ(refused({{"prompt", "x"}, {"grammar", wide}}), kGrammarTooCostly);
  EXPECT_EQ(post("/v1/completions", bodies[0])["choices"][0]["text"], alone[0]);  // and it serves on
}

}  // namespace
}  // namespace lockstep
