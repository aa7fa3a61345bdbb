// End to end: the real server on a free loopback port with the fixture models, talked to over
// HTTP. Concurrency, streaming, disconnects and bad input; every reply's ids equal its alone
// reply.
#include <gtest/gtest.h>

#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "http_client.h"
#include "models/registry.h"
#include "test_server.h"
#include "test_support.h"

namespace lockstep {
namespace {

using nlohmann::json;

std::string slow_model() { return test_data("../../bench/models/nemotron_h_small"); }

json post(int port, const std::string& path, const json& body, int* status = nullptr) {
  HttpReply reply = http_request(port, "POST", path, body.dump());
  if (status) *status = reply.status;
  json parsed = json::parse(reply.body, nullptr, false);
  return parsed;
}

json completion_body(const std::string& model, int salt, bool seeded, int max_tokens = 8) {
  std::vector<int> prompt;
  for (int i = 0; i < 3 + salt * 17; ++i) prompt.push_back((i * 31 + salt * 7) % 500);
  json body = {{"model", model}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"return_token_ids", true},
               {"ignore_eos", true}};
  if (seeded) body.update({{"temperature", 0.9}, {"seed", 1234 + salt}});
  return body;
}

// Eight requests, each alone, then all at once (half streaming), greedy and seeded: every
// reply's ids equal its alone reply's.
void expect_concurrent_replies_equal_alone(const std::string& family, TestServerOptions options) {
  TestServer server(test_data(family), family, options);
  const int port = server.port();
  for (bool seeded : {false, true}) {
    std::vector<json> bodies;
    std::vector<std::vector<int32_t>> alone;
    for (int i = 0; i < 8; ++i) {
      bodies.push_back(completion_body(family, i, seeded, 4 + i));
      alone.push_back(reply_ids(http_request(port, "POST", "/v1/completions", bodies.back().dump()), false));
      ASSERT_EQ(alone.back().size(), size_t(4 + i));
    }
    std::vector<std::future<std::vector<int32_t>>> replies;
    for (int i = 0; i < 8; ++i) {
      bool stream = i % 2 == 1;
      json body = bodies[size_t(i)];
      body["stream"] = stream;
      replies.push_back(std::async(std::launch::async, [port, body, stream] {
        return reply_ids(http_request(port, "POST", "/v1/completions", body.dump()), stream);
      }));
    }
    for (int i = 0; i < 8; ++i) EXPECT_EQ(replies[size_t(i)].get(), alone[size_t(i)]) << "request " << i;
  }
}

class ServerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ServerTest, HealthModelsAndRoutes) {
  TestServer server(test_data(GetParam()), GetParam(), {2, 8});
  EXPECT_EQ(http_request(server.port(), "GET", "/health").status, 200);
  HttpReply models = http_request(server.port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(json::parse(models.body)["data"][0]["id"], GetParam());
  EXPECT_EQ(http_request(server.port(), "GET", "/nowhere").status, 404);
  EXPECT_EQ(http_request(server.port(), "GET", "/v1/completions").status, 405);
}

TEST_P(ServerTest, ConcurrentRepliesEqualTheirAloneReplies) {
  expect_concurrent_replies_equal_alone(GetParam(), {8, 64});
}

// The same with the model split into two tensor-parallel ranks (`--tensor-parallel 2`).
TEST(ServerTensorParallel, ConcurrentRepliesEqualTheirAloneReplies) {
  for (const char* family : {"llama", "nemotron_h_moe"}) {
    TestServerOptions options{8, 64};
    options.tensor_parallel = 2;
    SCOPED_TRACE(family);
    expect_concurrent_replies_equal_alone(family, options);
  }
}

TEST_P(ServerTest, StreamingFramesAreServerSentEvents) {
  TestServer server(test_data(GetParam()), GetParam(), {2, 8});
  json body = completion_body(GetParam(), 1, false, 5);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  HttpReply reply = http_request(server.port(), "POST", "/v1/completions", body.dump());
  ASSERT_EQ(reply.status, 200);
  EXPECT_EQ(reply.headers["content-type"], "text/event-stream");
  std::vector<std::string> payloads = sse_payloads(reply.body);
  ASSERT_GE(payloads.size(), 3u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  json usage = json::parse(payloads[payloads.size() - 2]);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 5);
  json last = json::parse(payloads[payloads.size() - 3]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(last["object"], "text_completion");
}

TEST(ServerSlow, ADisconnectedClientFreesItsSlotForTheQueue) {
  TestServer server(slow_model(), "slow", {1, 8, 1 << 20, 512, WeightChoice::dummy});
  for (bool stream : {true, false}) {
    json endless = completion_body("slow", 2, false, 400);
    endless["stream"] = stream;
    {
      OpenRequest hanging(server.port(), "POST", "/v1/completions", endless.dump());
      ASSERT_TRUE(hanging.connected());
      if (stream) EXPECT_NE(hanging.read_until("data: ").find("data: "), std::string::npos);
      else std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }  // hangs up
    // One stream at a time: this runs only once the abandoned stream is gone.
    HttpReply next = http_request(server.port(), "POST", "/v1/completions", completion_body("slow", 3, false, 2).dump(), 120);
    EXPECT_EQ(next.status, 200) << (stream ? "after a streaming client left" : "after a waiting client left");
  }
  HttpReply metrics = http_request(server.port(), "GET", "/metrics");
  // The abandoned streams were cut short: far fewer than their 2 x 400 tokens were made.
  size_t at = metrics.body.find("\nlockstep_generated_tokens_total ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(std::stol(metrics.body.substr(at + 33)), 200) << metrics.body;
  EXPECT_NE(metrics.body.find("lockstep_requests_total{outcome=\"cancelled\"} 2"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("lockstep_active_streams 0"), std::string::npos);
}

TEST_P(ServerTest, BadInputGetsA4xxAndGoodStreamsFinishIdentically) {
  TestServer server(test_data(GetParam()), GetParam(), {4, 4, 4096});
  const int port = server.port();
  json good = completion_body(GetParam(), 4, true, 24);
  std::vector<int32_t> alone = reply_ids(http_request(port, "POST", "/v1/completions", good.dump()), false);
  std::vector<std::future<std::vector<int32_t>>> goods;
  for (int i = 0; i < 2; ++i)
    goods.push_back(std::async(std::launch::async, [port, good] {
      return reply_ids(http_request(port, "POST", "/v1/completions", good.dump()), false);
    }));
  std::string model = GetParam();
  struct Bad {
    std::string body;
    int status;
    std::string mention;
  } bads[] = {
      {"{not json", 400, "JSON"},
      {R"({"prompt": [1, 2], "max_tokens": "ten"})", 400, "max_tokens"},
      {R"({"prompt": [1, 2], "model": "other"})", 404, "other"},
      {R"({"max_tokens": 3})", 400, "prompt"},
      {R"({"prompt": []})", 400, "empty"},
      {R"({"prompt": [1, 99999]})", 400, "99999"},
      {R"({"prompt": [1, -3]})", 400, "-3"},
      {R"({"prompt": [1, 2], "max_tokens": 100000})", 400, "context"},
      {R"({"prompt": [1, 2], "max_tokens": -1})", 400, "max_tokens"},
      {R"({"prompt": [1, 2], "temperature": -1})", 400, "temperature"},
      {R"({"prompt": [1, 2], "top_p": 7})", 400, "top_p"},
      {R"({"prompt": [1, 2], "n": 17})", 400, "n"},
      {R"({"prompt": [1, 2], "logprobs": 21})", 400, "logprobs"},
      {R"({"prompt": [1, 2], "stop": 5})", 400, "stop"},
      // Found by the fuzzers: wrong types that once made a 500.
      {R"({"prompt": [1, 2], "stream_options": {"include_usage": 1}})", 400, "include_usage"},
      {R"({"prompt": [1, 2], "stream_options": {"include_usage": true, "x": 1}})", 400, "stream_options.x"},
      {R"({"prompt": "text, but this folder has no tokenizer"})", 400, "tokenizer"},
      {R"([1, 2, 3])", 400, "object"},
      {"{\"prompt\": [" + std::string(5000, '1') + "]}", 413, ""},
  };
  for (const Bad& bad : bads) {
    HttpReply reply = http_request(port, "POST", "/v1/completions", bad.body);
    EXPECT_EQ(reply.status, bad.status) << bad.body.substr(0, 80);
    json error = json::parse(reply.body, nullptr, false);
    ASSERT_FALSE(error.is_discarded()) << reply.body;
    ASSERT_TRUE(error.contains("error")) << reply.body;
    EXPECT_NE(error["error"]["message"].get<std::string>().find(bad.mention), std::string::npos)
        << error["error"]["message"];
  }
  HttpReply chat = http_request(port, "POST", "/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_EQ(chat.status, 400) << "no chat template in a fixture folder";
  for (auto& reply : goods) EXPECT_EQ(reply.get(), alone);
  HttpReply metrics = http_request(port, "GET", "/metrics");
  EXPECT_NE(metrics.body.find("lockstep_requests_total{outcome=\"invalid\"}"), std::string::npos);
}

TEST_P(ServerTest, A400NamesTheFieldAtFaultInParam) {
  TestServer server(test_data(GetParam()), GetParam(), {2, 8, 4096});
  struct Bad {
    std::string body;
    std::string param;
  } bads[] = {
      {R"({"prompt": [1, 99999]})", "prompt"},
      {R"({"prompt": [1, 4294967296]})", "prompt"},
      {R"({"prompt": []})", "prompt"},
      {R"({"prompt": [1, 2], "max_tokens": -1})", "max_tokens"},
      {R"({"prompt": [1, 2], "max_tokens": 100000})", "max_tokens"},
      {R"({"prompt": [1, 2], "temperature": 101})", "temperature"},
      {R"({"prompt": [1, 2], "top_p": 0})", "top_p"},
      {R"({"prompt": [1, 2], "min_p": 2})", "min_p"},
      {R"({"prompt": [1, 2], "logprobs": 21})", "logprobs"},
  };
  for (const Bad& bad : bads) {
    HttpReply reply = http_request(server.port(), "POST", "/v1/completions", bad.body);
    EXPECT_EQ(reply.status, 400) << bad.body;
    json error = json::parse(reply.body, nullptr, false);
    ASSERT_FALSE(error.is_discarded()) << reply.body;
    EXPECT_EQ(error["error"]["param"], bad.param) << bad.body << " -> " << reply.body;
  }
}

TEST_P(ServerTest, HeadIsGetWithoutABodyAndAWrongMethodSaysWhichAreAllowed) {
  TestServer server(test_data(GetParam()), GetParam(), {2, 8});
  for (const char* path : {"/health", "/v1/models", "/metrics"}) {
    HttpReply head = http_request(server.port(), "HEAD", path);
    EXPECT_EQ(head.status, 200) << path;
    EXPECT_TRUE(head.body.empty()) << path;
  }
  HttpReply put = http_request(server.port(), "PUT", "/health", "{}");
  EXPECT_EQ(put.status, 405);
  EXPECT_EQ(put.header("allow"), "GET, HEAD");
  HttpReply get = http_request(server.port(), "GET", "/v1/completions");
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.header("allow"), "POST");
}

TEST_P(ServerTest, AClientThatHalfClosesGetsItsReply) {
  TestServer server(test_data(GetParam()), GetParam(), {2, 8});
  const std::string body = completion_body(GetParam(), 1, false).dump();
  HttpReply alone = http_request(server.port(), "POST", "/v1/completions", body);
  ASSERT_EQ(alone.status, 200);
  // Sends the request, shuts its sending side (curl and Python clients may), then reads.
  ClientConnection client({"127.0.0.1", server.port(), {}}, std::chrono::milliseconds(30000));
  ASSERT_TRUE(client.open().ok());
  ASSERT_TRUE(client.send("POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body)
                  .ok());
  client.finish_sending();
  auto reply = client.read_reply();
  while (reply.ok() && reply->status == 100) reply = client.read_reply();  // an interim probe
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  EXPECT_EQ(reply->status, 200) << reply->body;
  EXPECT_EQ(reply_ids(*reply, false), reply_ids(alone, false));
}

TEST(ServerSlow, AFullQueueGets503WithRetryAfter) {
  TestServer server(slow_model(), "slow", {1, 1, 1 << 20, 512, WeightChoice::dummy});
  json slow = completion_body("slow", 5, false, 300);
  OpenRequest first(server.port(), "POST", "/v1/completions", slow.dump());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  OpenRequest second(server.port(), "POST", "/v1/completions", slow.dump());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  HttpReply third = http_request(server.port(), "POST", "/v1/completions", slow.dump());
  EXPECT_EQ(third.status, 503);
  EXPECT_EQ(third.headers["retry-after"], "1");
  json error = json::parse(third.body, nullptr, false);
  ASSERT_TRUE(error.contains("error"));
}

TEST_P(ServerTest, LogprobsCarryTheChosenIdAndAlternatives) {
  TestServer server(test_data(GetParam()), GetParam(), {2, 8});
  json body = completion_body(GetParam(), 6, false, 4);
  body["logprobs"] = 3;
  json reply = post(server.port(), "/v1/completions", body);
  ASSERT_TRUE(reply.contains("choices")) << reply.dump();
  json logprobs = reply["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["token_logprobs"].size(), 4u);
  ASSERT_EQ(logprobs["top_logprobs"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_LE(logprobs["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_EQ(logprobs["top_logprobs"][i].size(), 3u);
    // Greedy: the chosen id is the most likely one.
    EXPECT_EQ(logprobs["tokens"][i], std::to_string(reply["choices"][0]["token_ids"][i].get<int>()));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ServerTest, ::testing::Values("llama", "nemotron_h"));

}  // namespace
}  // namespace lockstep
