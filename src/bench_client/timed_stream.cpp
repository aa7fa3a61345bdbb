#include "bench_client/timed_stream.h"

#include <algorithm>
#include <latch>
#include <optional>
#include <thread>

namespace lockstep::bench {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

double TimedStream::ttft_s() const { return token_at.empty() ? 0.0 : seconds(token_at.front() - sent); }

double TimedStream::max_gap_s() const {
  double largest = 0;
  for (size_t i = 1; i < token_at.size(); ++i) largest = std::max(largest, seconds(token_at[i] - token_at[i - 1]));
  return largest;
}

double TimedStream::tok_s() const {
  if (token_at.size() < 2) return 0.0;
  double span = seconds(token_at.back() - token_at.front());
  return span > 0 ? double(token_at.size() - 1) / span : 0.0;
}

size_t ConcurrentRun::tokens() const {
  size_t total = 0;
  for (const TimedStream& stream : streams) total += stream.ids.size();
  return total;
}

std::string reply_error(const std::string& what, const HttpReply& reply) {
  std::string message = reply.body.substr(0, 300);
  nlohmann::json body = nlohmann::json::parse(reply.body, nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].is_object() && body["error"].contains("message") &&
      body["error"]["message"].is_string())
    message = body["error"]["message"].get<std::string>();
  return what + ": HTTP " + std::to_string(reply.status) + ": " + message;
}

Expected<TimedStream> run_timed_stream(const HttpEndpoint& server, const nlohmann::json& body, int timeout_seconds,
                                       const TokenWatch& watch) {
  TimedStream stream;
  std::optional<std::string> failure;
  bool done = false, hung_up = false;
  SseHandler on_event = [&](std::string_view data, Clock::time_point arrived) {
    if (data == "[DONE]") {
      done = true;
      return false;
    }
    nlohmann::json chunk = nlohmann::json::parse(data, nullptr, false);
    if (!chunk.is_object()) {
      failure = "a server-sent event is not a JSON object: " + std::string(data.substr(0, 200));
      return false;
    }
    if (chunk.contains("error")) {
      const nlohmann::json& error = chunk["error"];
      bool has_message = error.is_object() && error.contains("message") && error["message"].is_string();
      failure = "the stream failed: " + (has_message ? error["message"].get<std::string>() : error.dump());
      return false;
    }
    // The usage chunk (stream_options.include_usage): how much of the prompt the cache gave, and
    // how many drafts the server verified.
    if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
      auto count = [&](const char* details_key, const char* key, int64_t& out) {
        const auto details = usage->find(details_key);
        if (details == usage->end() || !details->is_object()) return;
        if (const auto value = details->find(key); value != details->end() && value->is_number_integer())
          out = value->get<int64_t>();
      };
      count("prompt_tokens_details", "cached_tokens", stream.cached_tokens);
      count("completion_tokens_details", "accepted_prediction_tokens", stream.accepted_drafts);
      count("completion_tokens_details", "rejected_prediction_tokens", stream.rejected_drafts);
    }
    size_t before = stream.ids.size();
    if (chunk.contains("choices") && chunk["choices"].is_array())
      for (const nlohmann::json& choice : chunk["choices"]) {
        if (!choice.is_object() || !choice.contains("token_ids")) continue;
        for (const nlohmann::json& id : choice["token_ids"]) {
          if (!id.is_number_integer()) {
            failure = "a chunk's token_ids are not integers: " + std::string(data.substr(0, 200));
            return false;
          }
          stream.ids.push_back(id.get<int32_t>());
          stream.token_at.push_back(arrived);
        }
      }
    if (stream.ids.size() > before && watch && !watch(stream)) {
      hung_up = true;
      return false;
    }
    return true;
  };
  stream.sent = Clock::now();
  Expected<HttpReply> reply = http_stream(server, "POST", "/v1/completions", body.dump(), on_event, timeout_seconds);
  stream.ended = Clock::now();
  if (!reply.ok()) return reply.error();
  if (reply->status != 200) return make_error(reply_error("POST /v1/completions", *reply));
  if (failure) return make_error(*failure);
  if (!done && !hung_up) return make_error("the stream ended without data: [DONE]");
  if (stream.ids.empty() && !hung_up)
    return make_error("the stream carried no token_ids: the server must support \"return_token_ids\"");
  return stream;
}

Expected<ConcurrentRun> run_concurrently(const HttpEndpoint& server, const std::vector<nlohmann::json>& bodies,
                                         int timeout_seconds) {
  std::vector<std::optional<Expected<TimedStream>>> results(bodies.size());
  std::latch release(1);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i)
    threads.emplace_back([&, i] {
      release.wait();
      results[i].emplace(run_timed_stream(server, bodies[i], timeout_seconds));
    });
  const Clock::time_point start = Clock::now();
  release.count_down();
  for (std::thread& thread : threads) thread.join();
  ConcurrentRun run;
  Clock::time_point last = start;
  for (auto& result : results) {
    if (!result->ok()) return result->error();
    last = std::max(last, (*result)->ended);
    run.streams.push_back(std::move(**result));
  }
  run.wall_s = seconds(last - start);
  return run;
}

}  // namespace lockstep::bench
