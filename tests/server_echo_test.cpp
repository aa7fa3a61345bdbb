// Completions for evaluation harnesses, end to end over HTTP (lm-eval-harness's loglikelihood
// requests): echo with the prompt's logprobs, max_tokens 0, text_offset into the echoed text,
// echo when streaming, and a list of prompts in one request.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "http_client.h"
#include "text_server.h"

namespace lockstep {
namespace {

using nlohmann::json;

// Characters (code points) of UTF-8 text: what text_offset counts.
int64_t characters(const std::string& s) {
  int64_t count = 0;
  for (unsigned char c : s) count += (c & 0xC0) != 0x80;
  return count;
}

TEST_F(TextServer, EchoWithLogprobsScoresThePromptAndMaxTokensZeroGeneratesNothing) {
  const std::string prompt = "the quick brown fox jumps over the lazy dog";
  json body = {{"prompt", prompt}, {"echo", true}, {"logprobs", 2}, {"max_tokens", 0}};
  json reply = post("/v1/completions", body);
  json choice = reply["choices"][0];
  EXPECT_EQ(choice["text"], prompt);
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(reply["usage"]["completion_tokens"], 0);
  const std::vector<int32_t> ids = text().tokenizer().encode(prompt);
  EXPECT_EQ(reply["usage"]["prompt_tokens"], ids.size());
  json lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ids.size());
  // The first token has nothing before it: null, as OpenAI sends it.
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(lp["tokens"][i], text().tokenizer().decode({ids[i]}, false)) << i;
    EXPECT_EQ(lp["text_offset"][i], characters(joined)) << i;
    joined += lp["tokens"][i].get<std::string>();
    if (i == 0) continue;
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    // Keyed by text: two alternatives that decode alike (lone bytes of random weights) are one key.
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    EXPECT_LE(lp["top_logprobs"][i].size(), 2u);
  }
  EXPECT_EQ(joined, prompt);
}

// The logprob a prompt token gets is the one the same token gets when the model generates it
// from the same fill row: score the prompt plus a greedy reply's first token, and compare.
TEST_F(TextServer, APromptTokensLogprobIsTheOneItHasWhenGenerated) {
  const std::string prompt = "hello there, how";
  json generated = post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 1}, {"logprobs", 3},
                                            {"return_token_ids", true}, {"ignore_eos", true}});
  const int32_t next = generated["choices"][0]["token_ids"][0];
  std::vector<int32_t> ids = text().tokenizer().encode(prompt);
  ids.push_back(next);
  json scored = post("/v1/completions", {{"prompt", ids}, {"echo", true}, {"logprobs", 3}, {"max_tokens", 0}});
  json lp = scored["choices"][0]["logprobs"];
  ASSERT_EQ(lp["token_logprobs"].size(), ids.size());
  EXPECT_EQ(lp["token_logprobs"].back(), generated["choices"][0]["logprobs"]["token_logprobs"][0]);
  EXPECT_EQ(lp["top_logprobs"].back(), generated["choices"][0]["logprobs"]["top_logprobs"][0]);
  // An id prompt echoes as its decoded text.
  EXPECT_EQ(scored["choices"][0]["text"], text().tokenizer().decode(ids, false));
}

TEST_F(TextServer, EchoLeadsTheReplyAndItsOffsetsRunOnIntoTheGeneratedText) {
  const std::string prompt = "once upon a time";
  json body = {{"prompt", prompt}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 6}, {"ignore_eos", true},
               {"return_token_ids", true}};
  json reply = post("/v1/completions", body);
  const std::string text_reply = reply["choices"][0]["text"];
  ASSERT_EQ(text_reply.substr(0, prompt.size()), prompt);
  json lp = reply["choices"][0]["logprobs"];
  std::vector<int32_t> ids = text().tokenizer().encode(prompt);
  for (int32_t id : reply["choices"][0]["token_ids"]) ids.push_back(id);
  ASSERT_EQ(lp["tokens"].size(), ids.size());
  // Each offset is where the token starts in the reply's text: the characters of the text the
  // tokens before it decode to, wherever that text is the reply's own beginning (not cut inside
  // a character; ill-formed bytes count as the U+FFFD the text shows). Offsets never go back.
  int checked = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(lp["text_offset"][i], lp["text_offset"][i - 1]) << i;
    }
    const std::string before = text().tokenizer().decode({ids.begin(), ids.begin() + ptrdiff_t(i)}, false);
    if (text_reply.compare(0, before.size(), before) != 0) continue;
    EXPECT_EQ(lp["text_offset"][i], characters(before)) << i;
    ++checked;
  }
  EXPECT_GE(checked, int(ids.size()) / 2);
  // Without echo, the same reply's own tokens, offsets from 0.
  body["echo"] = false;
  json plain = post("/v1/completions", body);
  EXPECT_EQ(prompt + plain["choices"][0]["text"].get<std::string>(), text_reply);
  EXPECT_EQ(plain["choices"][0]["logprobs"]["text_offset"][0], 0);
  // Streaming: the echo comes first, then the tokens, and the chunks' offsets run on.
  body["echo"] = true;
  body["stream"] = true;
  HttpReply streamed = http_request(server->port(), "POST", "/v1/completions", body.dump());
  std::string text_streamed;
  std::vector<int64_t> offsets;
  bool first = true;
  for (const std::string& payload : sse_payloads(streamed.body)) {
    if (payload == "[DONE]") break;
    json chunk_choice = json::parse(payload)["choices"][0];
    if (first) {
      EXPECT_EQ(chunk_choice["text"], prompt);
    }
    first = false;
    text_streamed += chunk_choice["text"].get<std::string>();
    if (!chunk_choice["logprobs"].is_null())
      for (const auto& offset : chunk_choice["logprobs"]["text_offset"]) offsets.push_back(offset);
  }
  EXPECT_EQ(text_streamed, text_reply);
  EXPECT_EQ(json(offsets), lp["text_offset"]);
}

// A prompt as long as the context is scored with max_tokens 0 (a loglikelihood request over a
// whole window): the same logprobs as its prefix has; with a token to generate it is refused.
TEST(ServerEcho, AWholeContextPromptIsScoredWithMaxTokensZero) {
  TestServer server(test_data("llama"), "llama", {.parallel = 2, .max_queue = 4, .context = 64});
  std::vector<int32_t> ids;
  for (int i = 0; i < 64; ++i) ids.push_back(1 + (i * 7) % 500);
  auto score = [&](std::vector<int32_t> prompt, int max_tokens) {
    json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"echo", true}, {"logprobs", 1}};
    return http_request(server.port(), "POST", "/v1/completions", body.dump());
  };
  HttpReply whole = score(ids, 0);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json logprobs = json::parse(whole.body)["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_EQ(logprobs.size(), 64u);
  HttpReply prefix = score(std::vector<int32_t>(ids.begin(), ids.end() - 1), 0);
  ASSERT_EQ(prefix.status, 200) << prefix.body;
  const json shorter = json::parse(prefix.body)["choices"][0]["logprobs"]["token_logprobs"];
  for (size_t i = 0; i < 63; ++i) EXPECT_EQ(logprobs[i], shorter[i]) << "token " << i;
  EXPECT_EQ(score(ids, 1).status, 400);
  ids.push_back(1);
  EXPECT_EQ(score(ids, 0).status, 400);
}

TEST_F(TextServer, AListOfPromptsAnswersEachAsItsOwnRequest) {
  const std::vector<std::string> prompts = {"red green", "a longer prompt about the blue sky", "z"};
  json body = {{"prompt", prompts}, {"max_tokens", 5}, {"n", 2}, {"temperature", 0.9}, {"seed", 77},
               {"return_token_ids", true}, {"ignore_eos", true}};
  json all = post("/v1/completions", body);
  ASSERT_EQ(all["choices"].size(), 6u);
  size_t prompt_tokens = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    prompt_tokens += text().tokenizer().encode(prompts[p]).size();
    for (size_t i = 0; i < 2; ++i) {
      json one = body;
      one["prompt"] = prompts[p];
      one["n"] = 1;
      one["seed"] = 77 + i;
      json alone = post("/v1/completions", one);
      const json& choice = all["choices"][p * 2 + i];
      EXPECT_EQ(choice["index"], p * 2 + i);
      EXPECT_EQ(choice["token_ids"], alone["choices"][0]["token_ids"]) << "prompt " << p << " choice " << i;
    }
  }
  EXPECT_EQ(all["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(all["usage"]["completion_tokens"], 30);
  // Lists of id lists too; a list that mixes kinds is refused, naming the field.
  json ids = post("/v1/completions", {{"prompt", {{1, 2, 3}, {4, 5}}}, {"max_tokens", 2}, {"ignore_eos", true}});
  EXPECT_EQ(ids["choices"].size(), 2u);
  HttpReply mixed = http_request(server->port(), "POST", "/v1/completions",
                                 json{{"prompt", {"text", 5}}, {"max_tokens", 2}}.dump());
  EXPECT_EQ(mixed.status, 400);
  EXPECT_EQ(json::parse(mixed.body)["error"]["param"], "prompt");
  HttpReply chat_zero = http_request(server->port(), "POST", "/v1/chat/completions",
                                     json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 0}}.dump());
  EXPECT_EQ(chat_zero.status, 400);
  EXPECT_EQ(json::parse(chat_zero.body)["error"]["param"], "max_tokens");
}

}  // namespace
}  // namespace lockstep
