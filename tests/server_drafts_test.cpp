// Drafts end to end: a server of the MTP fixture that drafts, talked to over HTTP. Replies,
// streamed or not, greedy or seeded, equal the same requests with "draft": false; usage reports
// the drafts each reply took, /metrics the totals, and a bad "draft" is refused by name.
#include <gtest/gtest.h>

#include <cmath>

#include <future>
#include <nlohmann/json.hpp>

#include "http_client.h"
#include "test_server.h"
#include "test_support.h"

namespace lockstep {
namespace {

using nlohmann::json;

json body_of(int salt, bool seeded) {
  std::vector<int> prompt;
  for (int i = 0; i < 2 + salt * 13; ++i) prompt.push_back((i * 37 + salt * 11) % 512);
  json body = {{"model", "mtp"}, {"prompt", prompt}, {"max_tokens", 12 + salt}, {"return_token_ids", true},
               {"ignore_eos", true}};
  if (seeded) body.update({{"temperature", 0.8}, {"seed", 77 + salt}});
  return body;
}


TEST(ServerDrafts, RepliesEqualTheirReplyWithoutDraftsAtAnyConcurrency) {
  TestServer server(test_data("nemotron_h_mtp"), "mtp", {.parallel = 6, .max_queue = 64, .draft_tokens = 3});
  ASSERT_TRUE(server.info().draft_head);
  const int port = server.port();
  for (bool seeded : {false, true}) {
    std::vector<json> bodies;
    std::vector<std::vector<int32_t>> plain;
    for (int i = 0; i < 6; ++i) {
      bodies.push_back(body_of(i, seeded));
      json off = bodies.back();
      off["draft"] = false;
      plain.push_back(reply_ids(http_request(port, "POST", "/v1/completions", off.dump()), false));
      ASSERT_EQ(plain.back().size(), size_t(12 + i));
    }
    std::vector<std::future<std::vector<int32_t>>> replies;
    for (int i = 0; i < 6; ++i) {
      const bool stream = i % 2 == 1;
      json body = bodies[size_t(i)];
      body["stream"] = stream;
      replies.push_back(std::async(std::launch::async, [port, body, stream] {
        return reply_ids(http_request(port, "POST", "/v1/completions", body.dump()), stream);
      }));
    }
    for (int i = 0; i < 6; ++i) EXPECT_EQ(replies[size_t(i)].get(), plain[size_t(i)]) << "request " << i;
  }
  const std::string metrics = http_request(port, "GET", "/metrics").body;
  EXPECT_GT(metric_value(metrics, "lockstep_drafted_tokens_total"), 0) << metrics;
  EXPECT_NE(metrics.find("lockstep_accepted_draft_tokens_by_position_total{position=\"3\"}"), std::string::npos);
  // Where the lane thread's time went: the passes and the head's passes took some.
  for (const char* part : {"pass", "head", "host"}) {
    const double seconds = metric_value(metrics, std::string("lockstep_step_seconds_total{part=\"") + part + "\"}");
    ASSERT_FALSE(std::isnan(seconds)) << part << "\n" << metrics;
    if (std::string(part) == "host") EXPECT_GE(seconds, 0.0);
    else EXPECT_GT(seconds, 0.0) << part;
  }
}

TEST(ServerDrafts, UsageCountsTheDraftsAReplyVerified) {
  TestServer server(test_data("nemotron_h_mtp"), "mtp", {.parallel = 2, .max_queue = 8, .draft_tokens = 2});
  for (bool draft : {true, false}) {
    json body = body_of(3, false);
    body["draft"] = draft;
    const json reply = json::parse(http_request(server.port(), "POST", "/v1/completions", body.dump()).body);
    const json& details = reply["usage"]["completion_tokens_details"];
    ASSERT_TRUE(details.contains("accepted_prediction_tokens")) << reply.dump();
    const int64_t accepted = details["accepted_prediction_tokens"], rejected = details["rejected_prediction_tokens"];
    EXPECT_LE(accepted, reply["usage"]["completion_tokens"].get<int64_t>());
    if (draft) EXPECT_GT(accepted + rejected, 0) << "a drafting reply verifies drafts";
    else EXPECT_EQ(accepted + rejected, 0) << "\"draft\": false verifies none";
  }
  json bad = body_of(1, false);
  bad["draft"] = "yes";
  const HttpReply refused = http_request(server.port(), "POST", "/v1/completions", bad.dump());
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(json::parse(refused.body)["error"]["param"], "draft") << refused.body;
}

}  // namespace
}  // namespace lockstep
