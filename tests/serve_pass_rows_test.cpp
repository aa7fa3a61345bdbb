// `lockstep serve --pass-rows`: a pass holds more rows than a chunk beside every decoding stream,
// so a fill step packs the next chunk of several new prompts, a burst of them fills in fewer
// passes, and every reply is the one the default pass gives (packing changes no bits).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <thread>
#include <vector>

#include "http_client.h"
#include "serve_process.h"
#include "test_support.h"

namespace lockstep {
namespace {

using nlohmann::json;

// The server's count of fill steps, from /metrics.
double fill_steps(int port) {
  return metric_value(http_request(port, "GET", "/metrics").body, "lockstep_fill_steps_total");
}

// Each request on its own thread, all at once; the replies in request order.
std::vector<HttpReply> send_all(int port, const std::vector<json>& requests) {
  std::vector<HttpReply> replies(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i)
    threads.emplace_back(
        [&, i] { replies[i] = http_request(port, "POST", "/v1/completions", requests[i].dump()); });
  for (std::thread& t : threads) t.join();
  return replies;
}

// send_all's replies' token ids.
std::vector<std::vector<int32_t>> send_together(int port, const std::vector<json>& requests) {
  const std::vector<HttpReply> replies = send_all(port, requests);
  std::vector<std::vector<int32_t>> ids;
  for (const HttpReply& reply : replies) {
    EXPECT_EQ(reply.status, 200) << reply.body;
    ids.push_back(reply_ids(reply, false));
  }
  return ids;
}

TEST(ServePassRows, ABurstOfPromptsFillsInFewerPassesWithTheSameReplies) {
  // Four prompts of 10 chunks each (so they overlap however the requests are scheduled); the
  // default pass (8 + 4 rows) holds one chunk at a time.
  std::vector<json> requests;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> prompt;
    for (int p = 0; p < 80; ++p) prompt.push_back(int32_t(1 + (37 * i + 11 * p) % 500));
    json request = {{"prompt", prompt}, {"max_tokens", 6}, {"ignore_eos", true}, {"return_token_ids", true}};
    if (i % 2) request["temperature"] = 1.0, request["seed"] = 100 + i;
    else request["temperature"] = 0;
    requests.push_back(request);
  }
  ServeProcess wide(test_data("llama"), {"--chunk", "8", "--parallel", "4", "--pass-rows", "64"});
  ServeProcess narrow(test_data("llama"), {"--chunk", "8", "--parallel", "4"});
  ASSERT_GT(wide.port, 0);
  ASSERT_GT(narrow.port, 0);
  const std::vector<std::vector<int32_t>> packed = send_together(wide.port, requests);
  const std::vector<std::vector<int32_t>> one_chunk = send_together(narrow.port, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(packed[i].size(), 6u) << "request " << i;
    EXPECT_EQ(packed[i], one_chunk[i]) << "request " << i;
  }
  const double wide_steps = fill_steps(wide.port), narrow_steps = fill_steps(narrow.port);
  EXPECT_EQ(narrow_steps, 40) << "4 prompts of 10 chunks, one chunk a pass";
  EXPECT_GE(wide_steps, 10);
  EXPECT_LT(wide_steps, narrow_steps);
}

TEST(ServePassRows, PromptLogprobsInAWidePassAreTheOnesOfTheDefaultPass) {
  // A pass of 64 rows asks for at most --chunk + --parallel (12) logit rows: a chunk scored for
  // its prompt logprobs (echo with logprobs) waits for a pass with logit rows to spare, and
  // every score and token is the default pass's. (Prompts of 10 chunks, so they overlap however
  // the requests are scheduled.)
  std::vector<json> requests;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> prompt;
    for (int p = 0; p < 80; ++p) prompt.push_back(int32_t(1 + (29 * i + 13 * p) % 500));
    json request = {{"prompt", prompt}, {"max_tokens", 4}, {"ignore_eos", true}, {"temperature", 0}};
    if (i < 3) request["echo"] = true, request["logprobs"] = 1;
    requests.push_back(request);
  }
  ServeProcess wide(test_data("llama"), {"--chunk", "8", "--parallel", "4", "--pass-rows", "64"});
  ServeProcess narrow(test_data("llama"), {"--chunk", "8", "--parallel", "4"});
  ASSERT_GT(wide.port, 0);
  ASSERT_GT(narrow.port, 0);
  const std::vector<HttpReply> packed = send_all(wide.port, requests), one_chunk = send_all(narrow.port, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_EQ(packed[i].status, 200) << packed[i].body;
    ASSERT_EQ(one_chunk[i].status, 200) << one_chunk[i].body;
    const json a = json::parse(packed[i].body)["choices"][0], b = json::parse(one_chunk[i].body)["choices"][0];
    EXPECT_EQ(a["text"], b["text"]) << "request " << i;
    EXPECT_EQ(a["logprobs"], b["logprobs"]) << "request " << i;
    if (i < 3) {
      EXPECT_GE(a["logprobs"]["token_logprobs"].size(), 80u) << "the prompt's scores and the reply's";
    }
  }
  EXPECT_EQ(fill_steps(narrow.port), 40) << "4 prompts of 10 chunks, one chunk a pass";
  EXPECT_LT(fill_steps(wide.port), 40) << "the unscored prompt's chunks pack beside the scored ones";
}

}  // namespace
}  // namespace lockstep
