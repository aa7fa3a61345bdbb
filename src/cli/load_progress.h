// A model's loading, shown on stderr: a bar redrawn in place on a terminal, else a line at each
// tenth. Checkpoints under 512 MiB load quietly.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace lockstep {

// "loading weights: 12.3 of 27.0 GB (45%), 8 s left"; with `bar`, a bar of 24 cells first.
std::string load_progress_line(int64_t done, int64_t total, double seconds, bool bar);

class LoadProgress {
 public:
  explicit LoadProgress(bool terminal);
  void update(int64_t done, int64_t total);

 private:
  bool terminal_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_draw_ = {};
  int last_tenth_ = 0;
};

}  // namespace lockstep
