// Carries a reply's streams' events (one stream a choice) from the lane thread to the HTTP thread
// that answers it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "lanes/lane_host.h"

namespace lockstep {

struct ChannelEvent {
  int choice = 0;  // the reply's choice whose stream sent it (n > 1)
  std::optional<int32_t> token;
  std::optional<TokenLogprobs> logprobs;
  std::optional<StreamEnd> end;
  std::chrono::steady_clock::time_point at;
  std::optional<TokenLogprobs> prompt_logprobs = std::nullopt;  // a prompt token's (echo)
};

// Shared by the HTTP thread and the stream's callbacks, so it lives until both are done.
class StreamChannel : public std::enable_shared_from_this<StreamChannel> {
 public:
  // The events to hand to LaneHost::submit for the reply's choice `choice`; they push into this
  // channel (one channel carries every choice of a reply).
  StreamEvents events(bool with_logprobs, int choice = 0, bool with_prompt_logprobs = false) {
    auto self = shared_from_this();
    StreamEvents out;
    out.on_token = [self, choice](int32_t id) {
      self->push({choice, id, std::nullopt, std::nullopt, std::chrono::steady_clock::now()});
    };
    out.on_end = [self, choice](const StreamEnd& end) {
      self->push({choice, std::nullopt, std::nullopt, end, std::chrono::steady_clock::now()});
    };
    if (with_logprobs)
      out.on_logprobs = [self, choice](const TokenLogprobs& lp) {
        self->push({choice, std::nullopt, lp, std::nullopt, std::chrono::steady_clock::now()});
      };
    if (with_prompt_logprobs)
      out.on_prompt_logprobs = [self, choice](const TokenLogprobs& lp) {
        self->push({choice, std::nullopt, std::nullopt, std::nullopt, std::chrono::steady_clock::now(), lp});
      };
    return out;
  }

  // The next event, or nullopt after `wait` with none.
  std::optional<ChannelEvent> next(std::chrono::milliseconds wait) {
    std::unique_lock lock(mutex_);
    if (!ready_.wait_for(lock, wait, [&] { return !events_.empty(); })) return std::nullopt;
    ChannelEvent event = std::move(events_.front());
    events_.pop_front();
    return event;
  }

 private:
  void push(ChannelEvent event) {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
    ready_.notify_one();
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<ChannelEvent> events_;
};

}  // namespace lockstep
