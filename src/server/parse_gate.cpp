#include "server/parse_gate.h"

#include <chrono>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace lockstep {

ParseGate::Pass::Pass(ParseGate& gate, size_t bytes, const std::function<bool()>& cancelled) {
  if (bytes < kLargeBodyBytes) return;
  std::unique_lock lock(gate.mutex_);
  while (gate.free_ == 0) {
    if (cancelled && cancelled()) {
      entered_ = false;
      return;
    }
    gate.freed_.wait_for(lock, std::chrono::milliseconds(50));
  }
  --gate.free_;
  gate_ = &gate;
}

ParseGate::Pass::~Pass() {
  if (!gate_) return;
#if defined(__GLIBC__)
  // The trees just freed are large: give their pages back to the system rather than keep them
  // in this thread's malloc arena (a server with many handler threads holds many arenas).
  malloc_trim(0);
#endif
  {
    std::lock_guard lock(gate_->mutex_);
    ++gate_->free_;
  }
  gate_->freed_.notify_one();
}

int ParseGate::free_slots() const {
  std::lock_guard lock(mutex_);
  return free_;
}

}  // namespace lockstep
