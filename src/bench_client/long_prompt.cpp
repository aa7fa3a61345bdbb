#include "bench_client/long_prompt.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "bench_client/timed_stream.h"

namespace lockstep::bench {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What the two streams' threads tell each other.
struct Handshake {
  std::mutex mutex;
  std::condition_variable changed;
  bool decoding = false;      // stream 1 has its first token (or has ended)
  std::optional<Clock::time_point> filled;  // stream 2's first token arrived
};

}  // namespace

Expected<LongPromptResult> run_long_prompt(const Target& target, const std::vector<std::string>& prompts,
                                           int prompt_tokens, int decode_tokens) {
  LongPromptResult result;
  result.prompt_tokens = prompt_tokens;
  result.decode_tokens = decode_tokens;
  const nlohmann::json decode_body =
      completion_body(target, prompt_json(target, prompts[0]), decode_tokens, 0.0, std::nullopt);
  const nlohmann::json fill_body =
      completion_body(target, long_prompt_ids(prompts, size_t(prompt_tokens), 1), 1, 0.0, std::nullopt);

  Handshake handshake;
  std::optional<Expected<TimedStream>> decode;
  std::thread decoder([&] {
    TokenWatch watch = [&](const TimedStream& so_far) {
      std::lock_guard lock(handshake.mutex);
      if (!handshake.decoding) {
        handshake.decoding = true;
        handshake.changed.notify_all();
      }
      // Keep going until a token arrives after stream 2's first: that closes the last gap.
      return !(handshake.filled && so_far.token_at.back() > *handshake.filled);
    };
    decode.emplace(run_timed_stream(target.server, decode_body, target.timeout_seconds, watch));
    std::lock_guard lock(handshake.mutex);
    handshake.decoding = true;  // ended early or failed: do not leave the sender waiting
    handshake.changed.notify_all();
  });
  {
    std::unique_lock lock(handshake.mutex);
    handshake.changed.wait(lock, [&] { return handshake.decoding; });
  }
  TokenWatch mark_fill = [&](const TimedStream& so_far) {
    std::lock_guard lock(handshake.mutex);
    if (!handshake.filled) handshake.filled = so_far.token_at.front();
    return true;
  };
  Expected<TimedStream> fill = run_timed_stream(target.server, fill_body, target.timeout_seconds, mark_fill);
  decoder.join();
  if (!decode->ok()) return decode->error();
  if (!fill.ok()) return fill.error();
  if (fill->token_at.empty()) return make_error("the long prompt's stream returned no token");

  const TimedStream& stream1 = **decode;
  const Clock::time_point fill_start = fill->sent, fill_end = fill->token_at.front();
  result.fill_s = fill->ttft_s();
  result.decode_covered = !stream1.token_at.empty() && stream1.token_at.back() >= fill_end;
  result.fill_sent_s = seconds(fill_start - stream1.sent);
  result.fill_first_token_s = seconds(fill_end - stream1.sent);
  for (size_t i = 0; i < stream1.token_at.size(); ++i) {
    Clock::time_point at = stream1.token_at[i];
    result.decode_token_times_s.push_back(seconds(at - stream1.sent));
    if (at >= fill_start && at <= fill_end) ++result.decode_tokens_in_fill;
    if (i > 0 && at > fill_start && stream1.token_at[i - 1] < fill_end)  // the gap overlaps the fill
      result.decode_max_gap_s = std::max(result.decode_max_gap_s, seconds(at - stream1.token_at[i - 1]));
  }

  // Alone, a different prompt of the same length, so that a prompt cache could not help it.
  const nlohmann::json alone_body =
      completion_body(target, long_prompt_ids(prompts, size_t(prompt_tokens), 2), 1, 0.0, std::nullopt);
  Expected<TimedStream> alone = run_timed_stream(target.server, alone_body, target.timeout_seconds);
  if (!alone.ok()) return alone.error();
  result.alone_ttft_s = alone->ttft_s();
  return result;
}

}  // namespace lockstep::bench
