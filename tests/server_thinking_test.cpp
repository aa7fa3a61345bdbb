// max_reasoning_tokens end to end: a model whose vocabulary has <think> and </think> tokens, a
// template that opens thinking in the prompt, and random weights that would think on: past the
// budget, </think> comes next, and the reply is the same alone, beside others and streamed.
#include <gtest/gtest.h>

#include <future>
#include <nlohmann/json.hpp>

#include "text_server.h"

namespace lockstep {
namespace {

constexpr int32_t kThinkClose = 509;

class ThinkingServer : public TextServer {
 protected:
  void SetUp() override {
    auto made = TempDir::create();
    ASSERT_TRUE(made.ok());
    dir = std::make_unique<TempDir>(std::move(*made));
    write_tokenizer(*dir, /*think_tokens=*/true);
    server = std::make_unique<TestServer>(dir->path(), "tiny");
  }
  static json ask(int64_t budget, int seed) {
    json body = {{"messages", {{{"role", "user"}, {"content", "think about it"}}}}, {"max_tokens", 24},
                 {"chat_template_kwargs", {{"think", true}}}, {"return_token_ids", true}, {"ignore_eos", true},
                 {"temperature", 1.0}, {"seed", seed}};
    if (budget >= 0) body["max_reasoning_tokens"] = budget;
    return body;
  }
};

TEST_F(ThinkingServer, PastTheBudgetThinkingEnds) {
  for (int64_t budget : {0, 1, 6}) {
    json reply = post("/v1/chat/completions", ask(budget, 3));
    const std::vector<int32_t> ids = reply["choices"][0]["token_ids"];
    ASSERT_GT(ids.size(), size_t(budget));
    EXPECT_EQ(ids[size_t(budget)], kThinkClose) << "budget " << budget;
    for (int64_t i = 0; i < budget; ++i) EXPECT_NE(ids[size_t(i)], kThinkClose);
    EXPECT_TRUE(reply["choices"][0]["message"].contains("reasoning_content")) << reply;
  }
  // Without one, this seed thinks on past six tokens.
  const std::vector<int32_t> free = post("/v1/chat/completions", ask(-1, 3))["choices"][0]["token_ids"];
  EXPECT_NE(free[6], kThinkClose);
}

TEST_F(ThinkingServer, ABudgetedReplyIsTheSameAloneBesideOthersAndStreamed) {
  std::vector<json> bodies = {ask(4, 10), ask(2, 11), ask(-1, 12), ask(0, 13)};
  std::vector<json> alone;
  for (const json& body : bodies) alone.push_back(post("/v1/chat/completions", body)["choices"][0]);
  std::vector<std::future<json>> together;
  for (const json& body : bodies)
    together.push_back(std::async(std::launch::async, [&, body] { return post("/v1/chat/completions", body)["choices"][0]; }));
  for (size_t i = 0; i < bodies.size(); ++i) EXPECT_EQ(together[i].get(), alone[i]) << "request " << i;
  EXPECT_EQ(streamed_text("/v1/chat/completions", bodies[0]), alone[0]["message"]["content"]);
}

TEST_F(TextServer, ABudgetNeedsThinkTokens) {
  json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_reasoning_tokens", 3}};
  HttpReply reply = http_request(server->port(), "POST", "/v1/chat/completions", body.dump());
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(json::parse(reply.body)["error"]["param"], "max_reasoning_tokens") << reply.body;
  body["max_reasoning_tokens"] = -1;
  EXPECT_EQ(http_request(server->port(), "POST", "/v1/chat/completions", body.dump()).status, 400);
}

}  // namespace
}  // namespace lockstep
