#include "soak_clients.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

namespace lockstep::soak {

namespace {

using std::chrono::milliseconds;

// A queued request under ASan waits for the streams ahead of it: long prompts fill slowly.
constexpr int kReplyTimeoutSeconds = 300;
constexpr milliseconds kReplyTimeout{kReplyTimeoutSeconds * 1000};

int uniform(std::mt19937_64& random, int low, int high) { return std::uniform_int_distribution<int>(low, high)(random); }

template <class T>
const T& pick(const std::vector<T>& items, std::mt19937_64& random) {
  return items[size_t(uniform(random, 0, int(items.size()) - 1))];
}

ClientOutcome failed(std::string why) {
  ClientOutcome outcome;
  outcome.failure = std::move(why);
  return outcome;
}

// A reply other than a completed one: only a 503 "busy" with Retry-After is allowed.
ClientOutcome refused(const std::string& what, const HttpReply& reply) {
  nlohmann::json body = nlohmann::json::parse(reply.body, nullptr, false);
  const bool json_error = !body.is_discarded() && body.is_object() && body.contains("error");
  if (reply.status == 503 && !reply.header("retry-after").empty() && json_error) {
    ClientOutcome outcome;
    outcome.busy = true;
    return outcome;
  }
  return failed(what + ": answered " + std::to_string(reply.status) + ": " + reply.body.substr(0, 300));
}

ClientOutcome compared(const SoakCase& soak_case, const Expected<ReplyRecord>& record) {
  if (!record.ok()) return failed(soak_case.name + ": " + record.error().message);
  ClientOutcome outcome;
  std::string difference_text = difference(soak_case, *record);
  outcome.checked = difference_text.empty();
  outcome.mismatch = !outcome.checked;
  if (outcome.mismatch) outcome.failure = soak_case.name + ": " + difference_text;
  return outcome;
}

ClientOutcome judge_whole(const SoakCase& soak_case, const HttpReply& reply, bool streamed) {
  if (reply.status != 200) return refused(soak_case.name, reply);
  return compared(soak_case, read_reply_body(reply.body, soak_case.chat(), streamed));
}

// The reply after any interim "100 Continue".
Expected<HttpReply> final_reply(ClientConnection& connection) {
  while (true) {
    auto reply = connection.read_reply();
    if (!reply.ok() || reply->status != 100) return reply;
  }
}

// Streams `soak_case`, handing each event to the reader until it hangs up (a cut after
// `events_wanted` events, 0: read to the end).
struct StreamRead {
  ReplyRecord record;
  Status chunks;  // the first bad chunk
  bool done = false;
};
Expected<HttpReply> read_stream(const HttpEndpoint& server, const SoakCase& soak_case, int events_wanted, StreamRead& read) {
  int events = 0;
  return http_stream(
      server, "POST", soak_case.path, soak_case.text(true),
      [&](std::string_view data, std::chrono::steady_clock::time_point) {
        if (read.done) {
          read.chunks = make_error("an event after [DONE]");
          return false;
        }
        if (data == "[DONE]") return read.done = true;
        if (Status added = add_stream_chunk(data, soak_case.chat(), read.record); !added.ok()) {
          read.chunks = added;
          return false;
        }
        return events_wanted == 0 || ++events < events_wanted;
      },
      kReplyTimeoutSeconds);
}

ClientOutcome ordinary(const SoakTarget& target, std::mt19937_64& random) {
  const SoakCase& soak_case = pick(target.cases, random);
  if (uniform(random, 0, 1) == 0) {
    auto reply = http_request(target.server, "POST", soak_case.path, soak_case.text(false), kReplyTimeoutSeconds);
    if (!reply.ok()) return failed(soak_case.name + ": " + reply.error().message);
    return judge_whole(soak_case, *reply, false);
  }
  StreamRead read;
  auto reply = read_stream(target.server, soak_case, 0, read);
  if (!reply.ok()) return failed(soak_case.name + " (streamed): " + reply.error().message);
  if (reply->status != 200) return refused(soak_case.name + " (streamed)", *reply);
  if (!read.chunks.ok()) return failed(soak_case.name + " (streamed): " + read.chunks.message());
  if (!read.done) return failed(soak_case.name + " (streamed): the stream ended without [DONE]");
  return compared(soak_case, read.record);
}

ClientOutcome vanish_mid_stream(const SoakTarget& target, std::mt19937_64& random) {
  const SoakCase& soak_case = pick(target.cases, random);
  StreamRead read;
  auto reply = read_stream(target.server, soak_case, uniform(random, 1, 4), read);
  if (!reply.ok()) return failed(soak_case.name + ": " + reply.error().message);
  if (reply->status != 200) return refused(soak_case.name, *reply);
  if (!read.chunks.ok()) return failed(soak_case.name + ": " + read.chunks.message());
  if (read.done) return compared(soak_case, read.record);  // it ended before the client left
  std::string problem = prefix_difference(soak_case, read.record);
  if (problem.empty()) return {};
  ClientOutcome outcome = failed(soak_case.name + ": " + problem);
  outcome.mismatch = true;
  return outcome;
}

ClientOutcome vanish_waiting(const SoakTarget& target, std::mt19937_64& random) {
  const SoakCase& soak_case = pick(target.cases, random);
  const bool stream = uniform(random, 0, 1) == 1;
  ClientConnection connection(target.server, milliseconds(30000));
  if (Status opened = connection.open(); !opened.ok()) return failed(opened.message());
  if (Status sent = connection.send(http_request_text(target.server, "POST", soak_case.path, soak_case.text(stream)));
      !sent.ok())
    return failed(soak_case.name + ": " + sent.message());
  std::this_thread::sleep_for(milliseconds(uniform(random, 0, 300)));
  connection.hang_up();
  return {};
}

ClientOutcome bad_request(const SoakTarget& target, std::mt19937_64& random) {
  return send_bad_request(target, pick(target.bad_requests, random));
}

ClientOutcome slow_client(const SoakTarget& target, std::mt19937_64& random) {
  const SoakCase& soak_case = pick(target.cases, random);
  const bool stream = uniform(random, 0, 1) == 1;
  std::string text = http_request_text(target.server, "POST", soak_case.path, soak_case.text(stream));
  if (uniform(random, 0, 1) == 1) text.insert(text.find("\r\n") + 2, "Expect: 100-continue\r\n");
  // Cut at random places into 8 to 20 pieces, sent over 1.5 to 3 s.
  const int pieces = uniform(random, 8, 20);
  const milliseconds pause(uniform(random, 1500, 3000) / pieces);
  std::vector<size_t> cuts = {0, text.size()};
  for (int i = 1; i < pieces; ++i) cuts.push_back(size_t(uniform(random, 0, int(text.size()))));
  std::sort(cuts.begin(), cuts.end());
  ClientConnection connection(target.server, kReplyTimeout);
  if (Status opened = connection.open(); !opened.ok()) return failed(opened.message());
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    if (Status sent = connection.send(std::string_view(text).substr(cuts[i], cuts[i + 1] - cuts[i])); !sent.ok())
      return failed(soak_case.name + ": " + sent.message());
    std::this_thread::sleep_for(pause);
  }
  auto reply = final_reply(connection);
  if (!reply.ok()) return failed(soak_case.name + ": " + reply.error().message);
  return judge_whole(soak_case, *reply, stream);
}

ClientOutcome half_close(const SoakTarget& target, std::mt19937_64& random) {
  const SoakCase& soak_case = pick(target.cases, random);
  const bool stream = uniform(random, 0, 1) == 1;
  ClientConnection connection(target.server, kReplyTimeout);
  if (Status opened = connection.open(); !opened.ok()) return failed(opened.message());
  if (Status sent = connection.send(http_request_text(target.server, "POST", soak_case.path, soak_case.text(stream)));
      !sent.ok())
    return failed(soak_case.name + ": " + sent.message());
  connection.finish_sending();
  auto reply = final_reply(connection);
  if (!reply.ok()) return failed(soak_case.name + (stream ? " (streamed)" : "") + ": " + reply.error().message);
  return judge_whole(soak_case, *reply, stream);
}

}  // namespace

ClientOutcome send_bad_request(const SoakTarget& target, const BadRequest& bad) {
  ClientConnection connection(target.server, milliseconds(60000));
  if (Status opened = connection.open(); !opened.ok()) return failed(opened.message());
  // The server may refuse before reading it all (a head over the limit): read its answer anyway.
  Status sent = connection.send(bad.text);
  auto reply = final_reply(connection);
  if (!reply.ok())
    return failed(bad.name + ": no reply: " + reply.error().message + (sent.ok() ? "" : " (sending: " + sent.message() + ")"));
  std::string problem = refusal_problem(bad, *reply);
  return problem.empty() ? ClientOutcome{} : failed(bad.name + ": " + problem);
}

const char* kind_name(ClientKind kind) {
  switch (kind) {
    case ClientKind::ordinary: return "ordinary";
    case ClientKind::vanish_mid_stream: return "vanish-mid-stream";
    case ClientKind::vanish_waiting: return "vanish-waiting";
    case ClientKind::bad_request: return "bad-request";
    case ClientKind::slow_client: return "slow-client";
    case ClientKind::half_close: return "half-close";
  }
  return "?";
}

ClientKind pick_kind(std::mt19937_64& random) {
  const int roll = uniform(random, 0, 2 * (kClientKinds - 1) - 1);
  return roll < kClientKinds - 1 ? ClientKind::ordinary : ClientKind(roll - (kClientKinds - 1) + 1);
}

ClientOutcome run_client(ClientKind kind, const SoakTarget& target, std::mt19937_64& random) {
  ClientOutcome outcome;
  switch (kind) {
    case ClientKind::ordinary: outcome = ordinary(target, random); break;
    case ClientKind::vanish_mid_stream: outcome = vanish_mid_stream(target, random); break;
    case ClientKind::vanish_waiting: outcome = vanish_waiting(target, random); break;
    case ClientKind::bad_request: outcome = bad_request(target, random); break;
    case ClientKind::slow_client: outcome = slow_client(target, random); break;
    case ClientKind::half_close: outcome = half_close(target, random); break;
  }
  if (!outcome.failure.empty()) outcome.failure = std::string(kind_name(kind)) + " " + outcome.failure;
  return outcome;
}

}  // namespace lockstep::soak
