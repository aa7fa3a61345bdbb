// One streaming completion timed token by token from the client's side, and many of them sent
// at once: what `lockstep bench` measures.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/status.h"
#include "http/http_client.h"

namespace lockstep::bench {

using Clock = std::chrono::steady_clock;

// What one stream saw: when it was sent, and each token with the arrival time of the server-sent
// event that carried it.
struct TimedStream {
  Clock::time_point sent;
  std::vector<Clock::time_point> token_at;  // [tokens]
  std::vector<int32_t> ids;                 // [tokens]
  Clock::time_point ended;                  // the reply's end (or the hang-up)
  int64_t cached_tokens = 0;                // usage.prompt_tokens_details.cached_tokens, when sent
  // usage.completion_tokens_details' accepted_prediction_tokens and rejected_prediction_tokens:
  // the MTP drafts the server verified for this reply, kept and not.
  int64_t accepted_drafts = 0, rejected_drafts = 0;

  // Seconds from sending to the first token; 0 with no tokens.
  double ttft_s() const;
  // The largest gap between consecutive tokens, in seconds; 0 with fewer than two.
  double max_gap_s() const;
  // Decode speed: the tokens after the first over the time from first to last; 0 with fewer
  // than two. (The first token's wait is the time to first token, not decoding.)
  double tok_s() const;
};

// Looks at the stream after each event that brought tokens; false hangs up.
using TokenWatch = std::function<bool(const TimedStream& so_far)>;

// POSTs `body` (a completion request with "stream": true and "return_token_ids": true) to
// /v1/completions and records its tokens. An error for a non-200 reply (with the server's
// message), an error event, malformed events, or a stream that ends without [DONE] or without
// any token ids (unless the watch hung up).
[[nodiscard]] Expected<TimedStream> run_timed_stream(const HttpEndpoint& server, const nlohmann::json& body,
                                                     int timeout_seconds, const TokenWatch& watch = {});

// Streams sent together, one thread and connection each.
struct ConcurrentRun {
  double wall_s = 0;                 // from releasing every stream to the end of the last
  std::vector<TimedStream> streams;  // in the order of the bodies
  size_t tokens() const;
};

// Sends every body at once and waits for all; the first error, if any, fails the whole run.
[[nodiscard]] Expected<ConcurrentRun> run_concurrently(const HttpEndpoint& server,
                                                       const std::vector<nlohmann::json>& bodies, int timeout_seconds);

// The error message of a non-200 reply: its status and the OpenAI-style error's message.
std::string reply_error(const std::string& what, const HttpReply& reply);

}  // namespace lockstep::bench
