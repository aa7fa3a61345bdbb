#include "server/stop_strings.h"

#include <algorithm>

namespace lockstep {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

std::string StopMatcher::push(const std::string& text) {
  if (stopped_) return {};
  pending_ += text;
  size_t earliest = std::string::npos;
  for (const std::string& stop : stops_) earliest = std::min(earliest, pending_.find(stop));
  if (earliest != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, earliest);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail of pending_ that is the start of some stop string.
  size_t hold = 0;
  for (const std::string& stop : stops_)
    for (size_t length = std::min(stop.size() - 1, pending_.size()); length > hold; --length)
      if (pending_.compare(pending_.size() - length, length, stop, 0, length) == 0) {
        hold = length;
        break;
      }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::finish() {
  std::string out = stopped_ ? std::string() : pending_;
  pending_.clear();
  return out;
}

}  // namespace lockstep
