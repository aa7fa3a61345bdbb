#include "cli/load_progress.h"

#include <cstdio>

namespace lockstep {

std::string load_progress_line(int64_t done, int64_t total, double seconds, bool bar) {
  const double fraction = total > 0 ? double(done) / double(total) : 1.0;
  char text[160];
  std::string out = "loading weights";
  if (bar) {
    const int cells = int(fraction * 24 + 1e-9);
    out += " [" + std::string(size_t(cells), '#') + std::string(size_t(24 - cells), '-') + "]";
  }
  std::snprintf(text, sizeof text, ": %.1f of %.1f GB (%d%%)", double(done) / 1e9, double(total) / 1e9,
                int(fraction * 100 + 1e-9));
  out += text;
  if (done >= total) {
    std::snprintf(text, sizeof text, ", in %.0f s", seconds);
  } else if (fraction > 0.02 && seconds > 1.0) {
    std::snprintf(text, sizeof text, ", %.0f s left", seconds / fraction - seconds);
  } else {
    text[0] = '\0';
  }
  return out + text;
}

LoadProgress::LoadProgress(bool terminal) : terminal_(terminal) {}

void LoadProgress::update(int64_t done, int64_t total) {
  if (total < (int64_t(512) << 20)) return;
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const bool last = done >= total;
  if (terminal_) {
    if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    std::fprintf(stderr, "\r%s\033[K%s", load_progress_line(done, total, seconds, true).c_str(), last ? "\n" : "");
    return;
  }
  const int tenth = int(10 * double(done) / double(total));
  if (tenth <= last_tenth_ && !last) return;
  if (last && last_tenth_ == 10) return;
  last_tenth_ = last ? 10 : tenth;
  std::fprintf(stderr, "%s\n", load_progress_line(done, total, seconds, false).c_str());
}

}  // namespace lockstep
