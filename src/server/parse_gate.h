// Bounds the memory request parsing takes. A body's JSON trees (the parsed body, the chat
// messages in their own order, the template's copy) take tens of times its bytes: 8 MiB of ids
// is about 190 MB while parsed. Bodies of kLargeBodyBytes or more are parsed at most `slots` at a
// time, so clients that send many at once wait their turn instead of growing the server
// without bound; smaller bodies never wait.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>

namespace lockstep {

class ParseGate {
 public:
  static constexpr size_t kLargeBodyBytes = 256 << 10;

  explicit ParseGate(int slots) : free_(slots) {}

  // Holds a slot while alive, for a body of `bytes` (none for a small body). Waits for one while
  // `cancelled` (polled) says false; entered() tells whether it got one or gave up.
  class Pass {
   public:
    Pass(ParseGate& gate, size_t bytes, const std::function<bool()>& cancelled);
    ~Pass();
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    bool entered() const { return entered_; }

   private:
    ParseGate* gate_ = nullptr;  // set while holding a slot
    bool entered_ = true;
  };

  int free_slots() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  int free_;
};

}  // namespace lockstep
