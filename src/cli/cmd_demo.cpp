// lockstep demo: a short client for a running server of the embedded model. It sends a few
// questions at once, shows the answers as they stream in, then asks each question again alone
// (without MTP drafts) and checks that every concurrent reply has exactly the same token ids.
#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "http/http_client.h"

namespace lockstep::cli {

namespace {

struct DemoFlags {
  std::string url = "http://127.0.0.1:8080";
  int wait_seconds = 60;
  std::string api_key;  // empty: LOCKSTEP_API_KEY, if set
};

struct Question {
  const char* text;
  const char* answer;
};

constexpr Question kQuestions[] = {
    {"What is 1234 + 4321?", "5555"},          {"Compute 9000 minus 1234.", "7766"},
    {"What is 12 * 34?", "408"},               {"Sort these numbers: 42 7 19 88 3", "3 7 19 42 88"},
    {"Reverse the word planet.", "tenalp"},    {"How many times does the letter a appear in banana?", "3"},
};

struct Answer {
  std::string text;
  std::vector<int32_t> ids;
};

// The concurrent questions stream and draft (when the server drafts); the alone ones do neither,
// so equal ids show both that batching and that drafts changed nothing.
std::string chat_body(const std::string& question, bool stream) {
  return nlohmann::json{{"messages", {{{"role", "user"}, {"content", question}}}},
                        {"max_tokens", 32},
                        {"stream", stream},
                        {"draft", stream},
                        {"return_token_ids", true}}
      .dump();
}

// "drafts: A of D accepted" from the server's /metrics, or empty when it has not drafted.
std::string drafts_line(const HttpEndpoint& server) {
  auto metrics = http_request(server, "GET", "/metrics", "", 5);
  if (!metrics.ok() || metrics->status != 200) return "";
  auto counter = [&](const std::string& name) -> long {
    const size_t at = metrics->body.find("\n" + name + " ");
    return at == std::string::npos ? 0 : std::atol(metrics->body.c_str() + at + name.size() + 2);
  };
  const long drafted = counter("lockstep_drafted_tokens_total");
  if (drafted == 0) return "";
  return "; drafts: " + std::to_string(counter("lockstep_accepted_draft_tokens_total")) + " of " +
         std::to_string(drafted) + " accepted";
}

// Streams one answer, printing each piece as "[n] piece" as it arrives.
Expected<Answer> stream_answer(const HttpEndpoint& server, int index, const std::string& question, std::mutex& out) {
  Answer answer;
  auto reply = http_stream(server, "POST", "/v1/chat/completions", chat_body(question, true),
                           [&](std::string_view data, std::chrono::steady_clock::time_point) {
                             if (data == "[DONE]") return true;
                             nlohmann::json chunk = nlohmann::json::parse(data, nullptr, false);
                             if (chunk.is_discarded() || chunk["choices"].empty()) return true;
                             const auto& choice = chunk["choices"][0];
                             std::string piece = choice["delta"].value("content", "");
                             if (choice.contains("token_ids"))
                               for (int32_t id : choice["token_ids"]) answer.ids.push_back(id);
                             answer.text += piece;
                             if (!piece.empty()) {
                               std::lock_guard lock(out);
                               std::cout << "  [" << index << "] " << nlohmann::json(piece).dump() << "\n" << std::flush;
                             }
                             return true;
                           });
  if (!reply.ok()) return reply.error();
  if (reply->status != 200) return make_error("the server answered " + std::to_string(reply->status) + ": " + reply->body);
  return answer;
}

Expected<Answer> alone_answer(const HttpEndpoint& server, const std::string& question) {
  auto reply = http_request(server, "POST", "/v1/chat/completions", chat_body(question, false));
  if (!reply.ok()) return reply.error();
  nlohmann::json body = nlohmann::json::parse(reply->body, nullptr, false);
  if (reply->status != 200 || body.is_discarded()) return make_error("the server answered " + std::to_string(reply->status));
  return Answer{body["choices"][0]["message"]["content"], body["choices"][0]["token_ids"].get<std::vector<int32_t>>()};
}

int run_demo(const DemoFlags& flags) {
  auto server = parse_http_url(flags.url);
  if (server.ok()) server->api_key = api_key_of(flags.api_key);
  if (!server.ok()) return fail(server.error().message);
  // Wait for the server to come up.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(flags.wait_seconds);
  for (bool said = false;; said = true) {
    auto health = http_request(*server, "GET", "/health", "", 5);
    if (health.ok() && health->status == 200) break;
    if (std::chrono::steady_clock::now() > deadline)
      return fail("no server answered at " + flags.url + " within " + std::to_string(flags.wait_seconds) + " s");
    if (!said)
      std::cerr << "lockstep: demo: waiting up to " << flags.wait_seconds << " s for the server at " << flags.url
                << " (GET /health)\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const size_t count = std::size(kQuestions);
  std::cout << "Sending " << count << " questions at once; pieces of the answers as they stream in:\n";
  std::mutex out;
  std::vector<std::future<Expected<Answer>>> streams;
  for (size_t i = 0; i < count; ++i)
    streams.push_back(std::async(std::launch::async, [&, i] { return stream_answer(*server, int(i + 1), kQuestions[i].text, out); }));
  std::vector<Answer> together;
  for (auto& stream : streams) {
    auto answer = stream.get();
    if (!answer.ok()) return fail(answer.error().message);
    together.push_back(*answer);
  }
  std::cout << "\nAnswers:\n";
  int right = 0, equal = 0;
  for (size_t i = 0; i < count; ++i) {
    bool correct = together[i].text == kQuestions[i].answer;
    right += correct;
    std::cout << "  [" << i + 1 << "] " << kQuestions[i].text << "  ->  " << together[i].text
              << (correct ? "  (right)" : "  (expected " + std::string(kQuestions[i].answer) + ")") << "\n";
  }
  const std::string drafts = drafts_line(*server);
  std::cout << "\nAsking each question again, alone" << (drafts.empty() ? "" : " and without drafts") << ":\n";
  for (size_t i = 0; i < count; ++i) {
    auto alone = alone_answer(*server, kQuestions[i].text);
    if (!alone.ok()) return fail(alone.error().message);
    bool same = alone->ids == together[i].ids;
    equal += same;
    std::cout << "  [" << i + 1 << "] " << (same ? "same token ids" : "DIFFERENT token ids") << " ("
              << together[i].ids.size() << " tokens)\n";
  }
  std::cout << "\n" << right << " of " << count << " answers right; exactness: " << equal << " of " << count
            << " concurrent replies equal to their alone runs, " << count - equal << " differ" << drafts << ".\n";
  return equal == int(count) ? 0 : 1;
}

}  // namespace

Command add_demo_command(CLI::App& app) {
  auto flags = std::make_shared<DemoFlags>();
  CLI::App* command = app.add_subcommand("demo", "Ask a running server of the embedded model a few questions at once");
  command->add_option("--url", flags->url, "the server");
  command->add_option("--api-key", flags->api_key,
                      "sent as 'Authorization: Bearer KEY' to a server started with --api-key; also read from "
                      "LOCKSTEP_API_KEY");
  command->add_option("--wait", flags->wait_seconds, "seconds to wait for the server to come up");
  return {command, [flags] { return run_demo(*flags); }};
}

}  // namespace lockstep::cli
