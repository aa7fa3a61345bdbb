// Tool calls end to end, on the text test model (random weights) with Qwen3's real chat template:
// tool_choice "required" or a named function makes the model write calls, which come back as
// message.tool_calls (streamed as OpenAI streams them), and tool messages render back.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "text_server.h"
#include "tokenizer/tokenizer_test_support.h"

namespace lockstep {
namespace {

using ordered = nlohmann::ordered_json;

const char* const kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
    "days": {"type": "integer"}}, "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}])";

class ToolServer : public TextServer {
 protected:
  void SetUp() override {
    std::ifstream file(testing_support::real_tokenizer_dir("qwen3") + "/tokenizer_config.json");
    if (!file) GTEST_SKIP() << "Qwen3's tokenizer_config.json is missing: run scripts/fetch-tokenizers";
    const std::string qwen3_template = json::parse(file)["chat_template"];
    auto made = TempDir::create();
    ASSERT_TRUE(made.ok());
    dir = std::make_unique<TempDir>(std::move(*made));
    write_tokenizer(*dir);
    json config = {{"bos_token", nullptr}, {"eos_token", "<|im_end|>"}, {"chat_template", qwen3_template}};
    ASSERT_TRUE(dir->write_file("tokenizer_config.json", config.dump()).ok());
    // The reply ends at <|im_end|> (the fixture's own end id is a byte token here).
    json model_config = json::parse(std::ifstream(dir->file("config.json")));
    model_config["eos_token_id"] = 511;
    std::filesystem::remove(dir->file("config.json"));
    ASSERT_TRUE(dir->write_file("config.json", model_config.dump()).ok());
    server = std::make_unique<TestServer>(dir->path(), "tiny", TestServerOptions{.context = 2048});
  }
  json ask(json choice, int seed, bool stream = false, bool parallel = false, int max_tokens = 300) {
    json body = {{"messages", {{{"role", "user"}, {"content", "weather in paris?"}}}}, {"tools", json::parse(kTools)},
                 {"tool_choice", choice}, {"max_tokens", max_tokens}, {"parallel_tool_calls", parallel}, {"temperature", 1.0}, {"seed", seed}, {"stream", stream}};
    if (!stream) return post("/v1/chat/completions", body);
    HttpReply reply = http_request(server->port(), "POST", "/v1/chat/completions", body.dump());
    // The chunks, folded into one message as a client does.
    json message = {{"content", ""}, {"tool_calls", json::array()}};
    for (const std::string& payload : sse_payloads(reply.body)) {
      if (payload == "[DONE]") break;
      json choice_chunk = json::parse(payload)["choices"][0];
      const json& delta = choice_chunk["delta"];
      if (delta.contains("content") && delta["content"].is_string()) message["content"] = message["content"].get<std::string>() + delta["content"].get<std::string>();
      for (const json& call : delta.value("tool_calls", json::array())) {
        const size_t k = call["index"];
        if (k == message["tool_calls"].size()) {
          EXPECT_TRUE(call.contains("id") && call["function"].contains("name")) << "a call's first delta names it";
          message["tool_calls"].push_back({{"id", call["id"]}, {"type", "function"},
                                           {"function", {{"name", call["function"]["name"]}, {"arguments", ""}}}});
        }
        json& function = message["tool_calls"][k]["function"];
        function["arguments"] = function["arguments"].get<std::string>() + call["function"].value("arguments", "");
      }
      if (!choice_chunk["finish_reason"].is_null()) message["finish_reason"] = choice_chunk["finish_reason"];
    }
    return message;
  }
};

void expect_valid_calls(const json& calls, const std::string& only) {
  ASSERT_TRUE(calls.is_array() && !calls.empty()) << calls.dump();
  for (const json& call : calls) {
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
    const std::string name = call["function"]["name"];
    if (!only.empty()) {
      EXPECT_EQ(name, only);
    }
    json arguments = json::parse(call["function"]["arguments"].get<std::string>());
    if (name == "add") {
      EXPECT_TRUE(arguments["a"].is_number() && arguments["b"].is_number()) << arguments;
    } else {
      ASSERT_EQ(name, "get_weather");
      EXPECT_TRUE(arguments["city"].is_string() && arguments["days"].is_number_integer()) << arguments;
    }
  }
}

TEST_F(ToolServer, RequiredAndNamedToolChoicesMakeCalls) {
  for (int seed = 1; seed <= 3; ++seed) {
    json reply = ask("required", seed);
    const json& message = reply["choices"][0]["message"];
    expect_valid_calls(message["tool_calls"], "");
    EXPECT_TRUE(message["content"].is_null()) << message;
    EXPECT_EQ(reply["choices"][0]["finish_reason"], "tool_calls");
    json named = ask({{"type", "function"}, {"function", {{"name", "add"}}}}, seed);
    expect_valid_calls(named["choices"][0]["message"]["tool_calls"], "add");
    EXPECT_EQ(named["choices"][0]["finish_reason"], "stop") << "a named tool_choice ends as OpenAI's does";
  }
}

TEST_F(ToolServer, StreamedCallsAreTheWholeRepliesCalls) {
  for (int seed = 4; seed <= 5; ++seed) {
    json whole = ask("required", seed)["choices"][0]["message"];
    json streamed = ask("required", seed, true);
    EXPECT_EQ(streamed["tool_calls"], whole["tool_calls"]);
    EXPECT_EQ(streamed["content"], "");
    EXPECT_EQ(streamed["finish_reason"], "tool_calls");
  }
}

// Several calls in one reply (the grammar puts a newline between them): no content, whole or
// streamed, and the same calls.
TEST_F(ToolServer, ParallelCallsStreamTheWholeRepliesCallsAndNoContent) {
  const json named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  size_t most = 0;
  for (int seed = 1; seed <= 8; ++seed) {
    json whole = ask(named, seed, false, true)["choices"][0]["message"];
    json streamed = ask(named, seed, true, true);
    most = std::max(most, whole["tool_calls"].size());
    EXPECT_TRUE(whole["content"].is_null()) << whole;
    EXPECT_EQ(streamed["content"], "") << "seed " << seed;
    EXPECT_EQ(streamed["tool_calls"], whole["tool_calls"]);
  }
  EXPECT_GE(most, 2u) << "no seed made more than one call: the test checks nothing";
}

// A forced call cut short by max_tokens: finish_reason "length", and no markup as content.
TEST_F(ToolServer, ACallCutByMaxTokensLeavesNoMarkup) {
  for (int seed = 1; seed <= 3; ++seed)
    for (bool parallel : {false, true}) {
      json whole = ask("required", seed, false, parallel, 20)["choices"][0];
      EXPECT_EQ(whole["finish_reason"], "length");
      EXPECT_TRUE(whole["message"]["content"].is_null()) << "nothing was said but the cut call: " << whole;
      json streamed = ask("required", seed, true, parallel, 20);
      EXPECT_EQ(streamed["content"], "") << streamed;
      EXPECT_EQ(streamed["finish_reason"], "length");
    }
  // The stream's first delta says so too: content null, not "".
  json body = {{"messages", {{{"role", "user"}, {"content", "weather in paris?"}}}}, {"tools", json::parse(kTools)},
               {"tool_choice", "required"}, {"max_tokens", 20}, {"temperature", 1.0}, {"seed", 1}, {"stream", true}};
  HttpReply reply = http_request(server->port(), "POST", "/v1/chat/completions", body.dump());
  const std::vector<std::string> payloads = sse_payloads(reply.body);
  ASSERT_FALSE(payloads.empty());
  const json first = json::parse(payloads.front())["choices"][0]["delta"];
  EXPECT_TRUE(first.contains("content") && first["content"].is_null()) << first;
}

// Choice i of n is the request with seed + i alone, its call ids too.
TEST_F(ToolServer, AChoicesCallIdsAreThoseOfItsSeedAlone) {
  json body = {{"messages", {{{"role", "user"}, {"content", "weather in paris?"}}}}, {"tools", json::parse(kTools)},
               {"tool_choice", "required"}, {"max_tokens", 300}, {"temperature", 1.0}, {"seed", 3}, {"n", 2}};
  json both = post("/v1/chat/completions", body);
  ASSERT_EQ(both["choices"].size(), 2u) << both;
  for (int i = 0; i < 2; ++i) {
    json alone = body;
    alone["n"] = 1;
    alone["seed"] = 3 + i;
    json reply = post("/v1/chat/completions", alone);
    EXPECT_EQ(both["choices"][i]["message"]["tool_calls"], reply["choices"][0]["message"]["tool_calls"]) << "choice " << i;
  }
}

TEST_F(ToolServer, ToolsAndCallsRenderThroughTheTemplate) {
  json messages = json::parse(R"([{"role": "user", "content": "add 1 and 2"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "3"}])");
  const std::string prompt = post("/apply-template", {{"messages", messages}, {"tools", json::parse(kTools)}})["prompt"];
  EXPECT_NE(prompt.find("<tools>\n{"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>"),
            std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<tool_response>\n3\n</tool_response>"), std::string::npos) << prompt;
  // The chat route renders the same: a reply after the tool's result.
  json body = {{"messages", messages}, {"tools", json::parse(kTools)}, {"max_tokens", 4}};
  EXPECT_EQ(post("/v1/chat/completions", body)["usage"]["prompt_tokens"],
            post("/tokenize", {{"content", prompt}})["tokens"].size());
}

// transformers renders Python dicts in their own order: tools and a call's arguments print in the
// order the request gave them, not sorted.
TEST_F(ToolServer, ToolsAndCallArgumentsKeepTheRequestsKeyOrder) {
  const std::string messages = R"([{"role": "user", "content": "add 1 and 2"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "add", "arguments": "{\"b\": 2, \"a\": 1}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "3"}])";
  const std::string tools = R"([{"type": "function", "function": {"name": "add", "parameters": {"type": "object",
    "properties": {"b": {"type": "number"}, "a": {"type": "number"}}}, "description": "adds"}}])";
  HttpReply rendered = http_request(server->port(), "POST", "/apply-template",
                                    R"({"messages": )" + messages + R"(, "tools": )" + tools + "}");
  ASSERT_EQ(rendered.status, 200) << rendered.body;
  const std::string prompt = json::parse(rendered.body)["prompt"];
  EXPECT_NE(prompt.find(R"({"type": "function", "function": {"name": "add", "parameters": {"type": "object", )"
                        R"("properties": {"b": {"type": "number"}, "a": {"type": "number"}}}, "description": "adds"}})"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find(R"("arguments": {"b": 2, "a": 1})"), std::string::npos) << prompt;
  // The chat route renders the same prompt.
  HttpReply reply = http_request(server->port(), "POST", "/v1/chat/completions",
                                 R"({"max_tokens": 2, "messages": )" + messages + R"(, "tools": )" + tools + "}");
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(json::parse(reply.body)["usage"]["prompt_tokens"], post("/tokenize", {{"content", prompt}})["tokens"].size());
}

TEST_F(ToolServer, BadToolFieldsAreRefusedByName) {
  auto refused = [&](json extra) {
    json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
    body.update(extra);
    HttpReply reply = http_request(server->port(), "POST", "/v1/chat/completions", body.dump());
    EXPECT_EQ(reply.status, 400) << reply.body;
    return json::parse(reply.body)["error"]["param"].get<std::string>();
  };
  EXPECT_EQ(refused({{"tools", json::parse(kTools)}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}),
            "tool_choice");
  EXPECT_EQ(refused({{"tool_choice", "required"}}), "tool_choice");
  EXPECT_EQ(refused({{"tools", json::array({{{"type", "function"}, {"function", {{"name", "bad name!"}}}}})}}), "tools");
  EXPECT_EQ(refused({{"tools", json::array({{{"type", "retrieval"}}})}}), "tools");
  // A wrapper key that is not a tool's, and two tools of one name (a call could mean either).
  EXPECT_EQ(refused({{"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}}}, {"strict", true}}})}}),
            "tools");
  EXPECT_EQ(refused({{"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}}}},
                                            {{"type", "function"}, {"function", {{"name", "f"}, {"description", "again"}}}}})}}),
            "tools");
  EXPECT_EQ(refused({{"tools", json::parse(kTools)}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}}),
            "tool_choice");
  EXPECT_EQ(refused({{"tools", json::parse(kTools)}, {"parallel_tool_calls", "yes"}}), "parallel_tool_calls");
  EXPECT_EQ(refused({{"functions", json::array({{{"name", "f"}}})}}), "functions");
}

}  // namespace
}  // namespace lockstep
