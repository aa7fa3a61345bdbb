// The server's text path end to end: a model folder with a tokenizer and a chat template
// (the llama fixture's weights with a small byte-level BPE tokenizer made here), so string
// prompts, chat messages, streamed text and stop strings all go through HTTP.
#include <gtest/gtest.h>

#include <map>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "http_client.h"
#include "text_server.h"

namespace lockstep {
namespace {

using nlohmann::json;

TEST_F(TextServer, StringPromptsStreamTheSameTextAsOneReply) {
  json body = {{"prompt", "the quick brown fox"}, {"max_tokens", 24}, {"ignore_eos", true}, {"return_token_ids", true}};
  json whole = post("/v1/completions", body);
  std::string text_reply = whole["choices"][0]["text"];
  EXPECT_EQ(whole["usage"]["completion_tokens"], 24);
  std::vector<int32_t> ids = whole["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  EXPECT_EQ(text_reply, text().tokenizer().decode(ids, true));
  EXPECT_EQ(streamed_text("/v1/completions", body), text_reply);
}

TEST_F(TextServer, AStopStringEndsTheReplyJustBeforeIt) {
  json body = {{"prompt", "hello there"}, {"max_tokens", 40}, {"ignore_eos", true}};
  std::string full = post("/v1/completions", body)["choices"][0]["text"];
  ASSERT_GE(full.size(), 12u);
  // A stop string from the middle of the reply (valid UTF-8, not at the very start).
  size_t at = full.size() / 2;
  while (at < full.size() && (static_cast<unsigned char>(full[at]) & 0xC0) == 0x80) ++at;
  size_t end = at + 1;
  while (end < full.size() && (static_cast<unsigned char>(full[end]) & 0xC0) == 0x80) ++end;
  std::string stop = full.substr(at, end - at);
  std::string expected = full.substr(0, full.find(stop));
  body["stop"] = {stop};
  json stopped = post("/v1/completions", body);
  EXPECT_EQ(stopped["choices"][0]["text"], expected);
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");
  std::string finish;
  EXPECT_EQ(streamed_text("/v1/completions", body, &finish), expected);
  EXPECT_EQ(finish, "stop");
}

TEST_F(TextServer, ChatMessagesGoThroughTheTemplate) {
  json messages = json::array({{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", "hi"}}});
  json body = {{"messages", messages}, {"max_tokens", 6}, {"ignore_eos", true}};
  json reply = post("/v1/chat/completions", body);
  ASSERT_TRUE(reply.contains("choices")) << reply.dump();
  EXPECT_EQ(reply["object"], "chat.completion");
  EXPECT_EQ(reply["choices"][0]["message"]["role"], "assistant");
  auto prompt = text().encode_chat(messages, json::object());
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(reply["usage"]["prompt_tokens"], prompt->size());
  EXPECT_EQ(prompt->front(), 510);  // <|im_start|> matched as one special token
  EXPECT_EQ(streamed_text("/v1/chat/completions", body), reply["choices"][0]["message"]["content"]);
  // Content given as text parts means the same.
  json parts = body;
  parts["messages"][1]["content"] = json::array({{{"type", "text"}, {"text", "h"}}, {{"type", "text"}, {"text", "i"}}});
  EXPECT_EQ(post("/v1/chat/completions", parts)["choices"][0]["message"], reply["choices"][0]["message"]);
}

// Chat logprobs' `bytes` are the token's own bytes: a token holding part of a character (here
// byte 0xE4, the first of 'ä') gives that byte, not the replacement character its text shows.
TEST_F(TextServer, ChatLogprobBytesAreTheTokensOwnBytes) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"max_tokens", 2},
               {"logit_bias", {{"228", 100}}}, {"logprobs", true}, {"top_logprobs", 1}, {"temperature", 0}};
  json reply = post("/v1/chat/completions", body);
  const json& content = reply["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u) << reply.dump();
  for (const json& token : content) {
    EXPECT_EQ(token["bytes"], json::array({228})) << token;
    EXPECT_EQ(token["top_logprobs"][0]["bytes"], json::array({228})) << token;
  }
  // Plain letters: the bytes of the text.
  body["logit_bias"] = {{"104", 100}};  // 'h'
  EXPECT_EQ(post("/v1/chat/completions", body)["choices"][0]["logprobs"]["content"][0]["bytes"], json::array({104}));
}

// A streamed chat choice opens with the role alone, as OpenAI's does (openai-node's stream helper
// builds the message from that chunk and would count logprobs on it twice); with include_usage
// every chunk before the last has "usage": null. The chunks' logprobs are the whole reply's.
TEST_F(TextServer, AChatStreamOpensWithTheRoleAloneAndItsLogprobsAreTheReplys) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"max_tokens", 4},
               {"logprobs", true}, {"temperature", 0}, {"ignore_eos", true}};
  const json whole = post("/v1/chat/completions", body);
  EXPECT_TRUE(whole["choices"][0]["message"].contains("refusal") && whole["choices"][0]["message"]["refusal"].is_null());
  EXPECT_TRUE(whole["choices"][0]["logprobs"]["refusal"].is_null());
  body["stream"] = true;
  body["n"] = 2;
  body["stream_options"] = {{"include_usage", true}};
  HttpReply reply = http_request(server->port(), "POST", "/v1/chat/completions", body.dump());
  std::vector<std::string> payloads = sse_payloads(reply.body);
  ASSERT_GE(payloads.size(), 4u);
  ASSERT_EQ(payloads.back(), "[DONE]");
  payloads.pop_back();
  std::map<int, json> logprobs;  // by choice
  std::map<int, int> chunks;
  for (size_t i = 0; i < payloads.size(); ++i) {
    const json chunk = json::parse(payloads[i]);
    ASSERT_TRUE(chunk.contains("usage")) << chunk;
    if (i + 1 == payloads.size()) {
      EXPECT_TRUE(chunk["usage"].is_object() && chunk["choices"].empty()) << chunk;
      continue;
    }
    EXPECT_TRUE(chunk["usage"].is_null()) << chunk;
    const json& choice = chunk["choices"][0];
    const int index = choice["index"];
    if (chunks[index]++ == 0) {
      EXPECT_EQ(choice["delta"], (json{{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}})) << chunk;
      EXPECT_TRUE(choice["logprobs"].is_null()) << chunk;
      continue;
    }
    EXPECT_FALSE(choice["delta"].contains("role")) << chunk;
    if (choice["logprobs"].is_null()) continue;
    for (const json& token : choice["logprobs"]["content"]) logprobs[index].push_back(token);
  }
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(logprobs[0], whole["choices"][0]["logprobs"]["content"]) << "n = 2's first choice is the request alone";
  // Without logprobs no chunk after the role's is empty (a first token that shows no text yet,
  // a byte of a character, sends nothing).
  body.erase("logprobs");
  body.erase("stream_options");
  body["logit_bias"] = {{"228", 100}};  // a byte that starts a character and never ends it
  for (const std::string& payload : sse_payloads(http_request(server->port(), "POST", "/v1/chat/completions", body.dump()).body)) {
    if (payload == "[DONE]") break;
    const json choice = json::parse(payload)["choices"][0];
    EXPECT_TRUE(!choice["delta"].empty() || !choice["finish_reason"].is_null()) << payload;
  }
}

// A template that opens <think> in the prompt (chat_template_kwargs think, here): the reply is
// thinking until the model closes it, so all of this untrained model's reply is reasoning_content,
// streamed or not; without it there is no reasoning_content at all.
TEST_F(TextServer, ThinkingInThePromptGoesToReasoningContent) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
               {"max_tokens", 8}, {"ignore_eos", true}, {"return_token_ids", true},
               {"chat_template_kwargs", {{"think", true}}}};
  json reply = post("/v1/chat/completions", body);
  const json& message = reply["choices"][0]["message"];
  std::vector<int32_t> ids = reply["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  ASSERT_TRUE(message.contains("reasoning_content")) << reply.dump();
  EXPECT_EQ(message["reasoning_content"], text().tokenizer().decode(ids, true));
  EXPECT_EQ(message["content"], "");
  // All 8 tokens are inside the think block: reasoning tokens, as OpenAI's usage counts them.
  EXPECT_EQ(reply["usage"]["completion_tokens_details"]["reasoning_tokens"], 8) << reply["usage"];
  body["stream"] = true;
  HttpReply streamed = http_request(server->port(), "POST", "/v1/chat/completions", body.dump());
  std::string reasoning, content;
  for (const std::string& payload : sse_payloads(streamed.body)) {
    if (payload == "[DONE]") break;
    const json chunk = json::parse(payload);
    const json& delta = chunk["choices"][0]["delta"];
    reasoning += delta.value("reasoning_content", "");
    content += delta.value("content", "");
  }
  EXPECT_EQ(reasoning, message["reasoning_content"]);
  EXPECT_EQ(content, "");
  body.erase("chat_template_kwargs");
  body["stream"] = false;
  const json plain = post("/v1/chat/completions", body);
  EXPECT_FALSE(plain["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_EQ(plain["usage"]["completion_tokens_details"]["reasoning_tokens"], 0);
}

// The text routes, as llama.cpp's server names them: what the chat and completion routes do with
// text, one step at a time.
TEST_F(TextServer, TokenizeDetokenizeAndApplyTemplateAreTheServersOwnSteps) {
  json tokens = post("/tokenize", {{"content", "hello there"}})["tokens"];
  auto ids = text().encode("hello there", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(tokens.get<std::vector<int32_t>>(), *ids);
  json pieces = post("/tokenize", {{"content", "hello"}, {"with_pieces", true}})["tokens"];
  ASSERT_FALSE(pieces.empty());
  EXPECT_TRUE(pieces[0].contains("piece"));
  EXPECT_EQ(post("/detokenize", {{"tokens", tokens}})["content"], "hello there");
  json messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  std::string prompt = post("/apply-template", {{"messages", messages}})["prompt"];
  auto rendered = text().render(messages, json::object());
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(prompt, *rendered);
  json parts = json::array({{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "h"}},
                                                                       {{"type", "text"}, {"text", "i"}}})}}});
  EXPECT_EQ(post("/apply-template", {{"messages", parts}})["prompt"], prompt) << "text parts, as the chat route takes them";
  for (auto [path, body] : {std::pair{"/tokenize", json{{"content", 5}}}, {"/tokenize", json{{"text", "x"}}},
                            {"/detokenize", json{{"tokens", {1, 100000}}}}, {"/apply-template", json{{"messages", 1}}}}) {
    HttpReply reply = http_request(server->port(), "POST", path, body.dump());
    EXPECT_EQ(reply.status, 400) << path << " " << body.dump();
  }
  EXPECT_EQ(http_request(server->port(), "GET", "/tokenize").status, 405);
}

// What a parser would settle silently is the client's error, named: a key given twice (which
// value wins differs between parsers), a field that cannot act (stream_options without a
// stream, an empty stop string), two limits that disagree, a text route's flag of the wrong type.
TEST_F(TextServer, AmbiguousOrIdleFieldsAreRefusedByName) {
  const std::string messages = R"([{"role": "user", "content": "hi"}])";
  const std::pair<std::string, std::string> refused[] = {
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": 1, "max_tokens": 7})"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "role": "system", "content": "hi"}]})"},
      {"/v1/chat/completions", R"({"messages": )" + messages + R"(, "stream_options": {"include_usage": true}})"},
      {"/v1/completions", R"({"prompt": "hi", "stop": ""})"},
      {"/v1/completions", R"({"prompt": "hi", "stop": ["x", ""]})"},
      {"/v1/chat/completions", R"({"messages": )" + messages + R"(, "max_tokens": 5, "max_completion_tokens": 3})"},
      {"/tokenize", R"({"content": "hi", "add_special": "yes"})"},
      {"/tokenize", R"({"content": "hi", "with_pieces": 1})"},
      {"/tokenize", R"({"content": "hi", "content": "ho"})"},
  };
  const char* params[] = {"max_tokens", "role", "stream_options", "stop", "stop", "max_tokens", "add_special",
                          "with_pieces", "content"};
  for (size_t i = 0; i < std::size(refused); ++i) {
    const auto& [path, body] = refused[i];
    HttpReply reply = http_request(server->port(), "POST", path, body);
    EXPECT_EQ(reply.status, 400) << body;
    if (reply.status == 400) {
      EXPECT_EQ(json::parse(reply.body)["error"]["param"], params[i]) << reply.body;
    }
  }
  // The same fields, meant one way, are taken.
  const std::pair<std::string, std::string> taken[] = {
      {"/v1/chat/completions", R"({"messages": )" + messages + R"(, "max_tokens": 3, "max_completion_tokens": 3})"},
      {"/v1/chat/completions", R"({"messages": )" + messages + R"(, "max_tokens": 2, "stream": true, "stream_options": {"include_usage": true}})"},
      {"/tokenize", R"({"content": "hi", "add_special": null, "with_pieces": false})"},
  };
  for (const auto& [path, body] : taken) EXPECT_EQ(http_request(server->port(), "POST", path, body).status, 200) << body;
  // A role a template would drop or print as it came is refused; `developer` is the system message.
  HttpReply bogus = http_request(server->port(), "POST", "/v1/chat/completions",
                                 R"({"messages": [{"role": "bogus", "content": "hi"}]})");
  EXPECT_EQ(bogus.status, 400);
  EXPECT_NE(bogus.body.find("bogus"), std::string::npos) << bogus.body;
  const auto rendered = [&](const char* role) {
    return post("/apply-template", {{"messages", json::array({{{"role", role}, {"content", "be brief"}},
                                                             {{"role", "user"}, {"content", "hi"}}})}})["prompt"];
  };
  EXPECT_EQ(rendered("developer"), rendered("system"));
  EXPECT_NE(rendered("system").get<std::string>().find("be brief"), std::string::npos);
}

// A body nested 30,000 levels deep (in a message's extra field, in chat_template_kwargs, or in a
// completion's unknown field) gets a 400 before anything walks it recursively, and the server
// keeps serving. (The chat path used to crash on the messages' conversion for the template.)
TEST_F(TextServer, DeeplyNestedBodiesGetA400AndTheServerLives) {
  const std::string deep = std::string(30000, '[') + std::string(30000, ']');
  const std::string bodies[][2] = {
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi", "extra": )" + deep + "}]}"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"x": )" + deep + "}}"},
      {"/v1/completions", R"({"prompt": "hi", "extra": )" + deep + "}"},
  };
  for (const auto& [path, body] : bodies) {
    HttpReply reply = http_request(server->port(), "POST", path, body);
    EXPECT_EQ(reply.status, 400) << path;
    EXPECT_NE(reply.body.find("nests deeper than"), std::string::npos) << reply.body.substr(0, 200);
  }
  json messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  json ok = post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 2}});
  EXPECT_TRUE(ok.contains("choices")) << ok.dump();
}

TEST_F(TextServer, AnOverlongTextPromptIsRefusedWithoutEncodingAllOfIt) {
  std::string word = "lorem ipsum dolor sit amet ";
  std::string long_text;
  while (long_text.size() < 900000) long_text += word;  // under the test server's 1 MiB body limit
  json ordinary = {{"prompt", "hello there"}, {"max_tokens", 2}};
  std::vector<std::thread> senders;
  std::vector<HttpReply> refused(6);
  for (size_t i = 0; i < refused.size(); ++i)
    senders.emplace_back([&, i] {
      refused[i] = http_request(server->port(), "POST", "/v1/completions", json{{"prompt", long_text}}.dump());
    });
  auto start = std::chrono::steady_clock::now();
  HttpReply served = http_request(server->port(), "POST", "/v1/completions", ordinary.dump());
  double ordinary_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (std::thread& sender : senders) sender.join();
  EXPECT_EQ(served.status, 200) << served.body;
  EXPECT_LT(ordinary_seconds, 5.0);
  for (const HttpReply& reply : refused) {
    EXPECT_EQ(reply.status, 400);
    EXPECT_NE(reply.body.find("more than 512 tokens"), std::string::npos) << reply.body.substr(0, 300);
    EXPECT_NE(reply.body.find(R"("param":"prompt")"), std::string::npos);
  }
}

// A chat of several turns, each sending the whole conversation again: with the prompt cache
// on, each turn after the first resumes from the last (cached_tokens) and replies exactly what
// the server without a cache replies.
TEST_F(TextServer, AMultiTurnChatResumesFromThePromptCacheAndRepliesTheSame) {
  TestServerOptions options;
  options.prompt_cache = true;
  TestServer cached(dir->path(), "tiny", options);
  json messages = json::array({{{"role", "system"}, {"content", "You add numbers. Answer with the sum only, please."}}});
  const char* questions[] = {"what is twelve plus thirty", "and then plus seven", "now take away four", "double it"};
  int64_t previous_prompt = 0;
  for (int turn = 0; turn < 4; ++turn) {
    messages.push_back({{"role", "user"}, {"content", questions[turn]}});
    json body = {{"messages", messages}, {"max_tokens", 12}, {"return_token_ids", true}};
    if (turn % 2) body["seed"] = 11 + turn, body["temperature"] = 0.9;
    const json plain = post("/v1/chat/completions", body);
    HttpReply reply = http_request(cached.port(), "POST", "/v1/chat/completions", body.dump());
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json resumed = json::parse(reply.body);
    EXPECT_EQ(resumed["choices"][0]["token_ids"], plain["choices"][0]["token_ids"]) << "turn " << turn;
    EXPECT_EQ(resumed["choices"][0]["message"], plain["choices"][0]["message"]) << "turn " << turn;
    const int64_t prompt = resumed["usage"]["prompt_tokens"], hit = resumed["usage"]["prompt_tokens_details"]["cached_tokens"];
    EXPECT_EQ(plain["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    if (turn == 0) EXPECT_EQ(hit, 0);
    else EXPECT_GT(hit, previous_prompt - 16) << "turn " << turn << ": resumes within a page of the last prompt";
    EXPECT_LT(hit, prompt);
    previous_prompt = prompt;
    messages.push_back(resumed["choices"][0]["message"]);
  }
  // cache_prompt: false skips it for one request.
  json body = {{"messages", messages}, {"max_tokens", 4}, {"cache_prompt", false}};
  HttpReply skipped = http_request(cached.port(), "POST", "/v1/chat/completions", body.dump());
  ASSERT_EQ(skipped.status, 200) << skipped.body;
  EXPECT_EQ(json::parse(skipped.body)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  body["cache_prompt"] = "no";
  EXPECT_EQ(http_request(cached.port(), "POST", "/v1/chat/completions", body.dump()).status, 400);
  // The counters, and every page unreserved again (cached pages give way to any stream).
  const std::string metrics = http_request(cached.port(), "GET", "/metrics", "").body;
  EXPECT_NE(metrics.find("lockstep_prompt_cache_hits_total 3"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("lockstep_prompt_cache_lookups_total 4"), std::string::npos) << metrics;
  EXPECT_EQ(metric_value(metrics, "lockstep_unreserved_kv_pages"), cached.info().kv_pages) << metrics;
}

}  // namespace
}  // namespace lockstep
