// The embedded model through HTTP: it answers the questions users type, keeps its measured
// accuracy on 200 held-out questions (phrasings and words it never trained on) with 8 concurrent
// streams, every reply equal to its alone run, and seeded sampling is reproducible.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>

#include "http_client.h"
#include "test_server.h"
#include "test_support.h"

namespace lockstep {
namespace {

using nlohmann::json;

std::string tiny_model() { return test_data("../../models/tiny-arith"); }

struct Question {
  std::string task, question, answer;
};

std::vector<Question> heldout() {
  std::vector<Question> out;
  std::ifstream file(tiny_model() + "/heldout.jsonl");
  std::string line;
  while (std::getline(file, line)) {
    json q = json::parse(line);
    out.push_back({q["task"], q["question"], q["answer"]});
  }
  return out;
}

struct Reply {
  std::string text;
  std::vector<int32_t> ids;
};

Reply ask(int port, const std::string& question, double temperature = 0.0, int seed = 0) {
  json body = {{"messages", {{{"role", "user"}, {"content", question}}}}, {"max_tokens", 32},
               {"return_token_ids", true}, {"temperature", temperature}};
  if (temperature > 0) body["seed"] = seed;
  HttpReply reply = http_request(port, "POST", "/v1/chat/completions", body.dump());
  json parsed = json::parse(reply.body, nullptr, false);
  if (reply.status != 200 || parsed.is_discarded()) return {};
  return {parsed["choices"][0]["message"]["content"], parsed["choices"][0]["token_ids"].get<std::vector<int32_t>>()};
}

TEST(TinyModel, AnswersHeldOutQuestionsConcurrentlyAndExactly) {
  std::vector<Question> questions = heldout();
  ASSERT_EQ(questions.size(), 200u);
  TestServer server(tiny_model(), "tiny-arith", {8, 256});
  const int port = server.port();
  std::vector<Reply> alone;
  for (const Question& q : questions) alone.push_back(ask(port, q.question));
  // Eight at a time, each stream sharing its rounds with seven others.
  std::vector<Reply> shared(questions.size());
  for (size_t start = 0; start < questions.size(); start += 8) {
    std::vector<std::future<Reply>> batch;
    for (size_t i = start; i < std::min(questions.size(), start + 8); ++i)
      batch.push_back(std::async(std::launch::async, [port, &questions, i] { return ask(port, questions[i].question); }));
    for (size_t i = start; i < std::min(questions.size(), start + 8); ++i) shared[i] = batch[i - start].get();
  }
  std::map<std::string, std::pair<int, int>> by_task;
  int right = 0;
  for (size_t i = 0; i < questions.size(); ++i) {
    EXPECT_EQ(shared[i].ids, alone[i].ids) << "question " << i << ": " << questions[i].question;
    bool correct = shared[i].text == questions[i].answer;
    right += correct;
    by_task[questions[i].task].first += correct;
    by_task[questions[i].task].second += 1;
  }
  // Issue 24's target: no task under 80%, at least 90% in all.
  for (const auto& [task, counts] : by_task) {
    std::printf("[ info     ] %-8s %2d / %2d\n", task.c_str(), counts.first, counts.second);
    EXPECT_GE(5 * counts.first, 4 * counts.second) << task << ": under 80%";
  }
  std::printf("[ info     ] all      %d / %zu\n", right, questions.size());
  // Measured: 194 of 200 on the CPU (97%; its model card has each task). The floor catches a
  // change that breaks the model's numerics.
  EXPECT_GE(right, 189) << "the model card's 194 of 200, less a margin";
}

// Questions of the kinds issue 24 found the first embedded model failing, typed as a user
// would: small sums, lists with commas, a 3-digit number from a 4-digit one, a string that is
// no word.
TEST(TinyModel, AnswersWhatUsersType) {
  TestServer server(tiny_model(), "tiny-arith", {4, 64});
  const std::vector<std::pair<std::string, std::string>> questions = {
      {"What is 2 + 2?", "4"},
      {"what is 17 + 25", "42"},
      {"Sort these numbers: 5, 3, 9, 1", "1, 3, 5, 9"},
      {"sort 10 and 2", "2, 10"},
      {"What is 4321 - 123?", "4198"},
      {"Reverse the word qwzyx.", "xyzwq"},
  };
  for (const auto& [question, answer] : questions) EXPECT_EQ(ask(server.port(), question).text, answer) << question;
}

TEST(TinyModel, SeededSamplingIsReproducible) {
  TestServer server(tiny_model(), "tiny-arith", {4, 64});
  const int port = server.port();
  const std::string question = "Sort these numbers: 42 7 19 88 3";
  Reply first = ask(port, question, 0.7, 5);
  ASSERT_FALSE(first.ids.empty());
  std::vector<std::future<Reply>> again;
  for (int i = 0; i < 4; ++i) again.push_back(std::async(std::launch::async, [&] { return ask(port, question, 0.7, 5); }));
  for (auto& reply : again) EXPECT_EQ(reply.get().ids, first.ids);
}

// A chat of several turns on the embedded model (a Nemotron-H: Mamba state), each turn sending
// the whole conversation again: with the prompt cache, turns after the first resume at a fill
// cut of the turn before, and every reply equals the one from a server without the cache.
TEST(TinyModel, AMultiTurnChatResumesFromThePromptCacheAtFillCuts) {
  TestServerOptions options;
  options.parallel = 4;
  TestServer plain(tiny_model(), "tiny-arith", options);
  options.prompt_cache = true;
  TestServer cached(tiny_model(), "tiny-arith", options);
  std::vector<Question> questions = heldout();
  json messages = json::array();
  int64_t previous_prompt = 0, resumed = 0;
  for (int turn = 0; turn < 6; ++turn) {
    messages.push_back({{"role", "user"}, {"content", questions[size_t(turn) * 7].question}});
    json body = {{"messages", messages}, {"max_tokens", 24}, {"return_token_ids", true}};
    if (turn % 2) body["temperature"] = 0.8, body["seed"] = 100 + turn;
    HttpReply off = http_request(plain.port(), "POST", "/v1/chat/completions", body.dump());
    HttpReply on = http_request(cached.port(), "POST", "/v1/chat/completions", body.dump());
    ASSERT_EQ(off.status, 200) << off.body;
    ASSERT_EQ(on.status, 200) << on.body;
    const json without = json::parse(off.body), with = json::parse(on.body);
    EXPECT_EQ(with["choices"][0]["token_ids"], without["choices"][0]["token_ids"]) << "turn " << turn;
    // A state model resumes only at a fill cut (the test server's chunk is 64): here the last
    // cut of the turn before, whose prompt starts this one.
    const int64_t hit = with["usage"]["prompt_tokens_details"]["cached_tokens"];
    EXPECT_EQ(hit, previous_prompt / 64 * 64) << "turn " << turn;
    resumed += hit;
    previous_prompt = with["usage"]["prompt_tokens"];
    messages.push_back(with["choices"][0]["message"]);
  }
  EXPECT_GT(resumed, 0);
  EXPECT_EQ(cached.api().lanes().stats().unreserved_pages, cached.info().kv_pages);
  EXPECT_GT(cached.api().lanes().stats().cache.snapshots, 0);
}

}  // namespace
}  // namespace lockstep
