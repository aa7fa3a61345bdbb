#include "server/reasoning.h"

#include <algorithm>

namespace lockstep {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

// The length of the longest end of `text` that is a start of `tag` (a tag that may be arriving).
size_t partial_tag(const std::string& text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.compare(text.size() - n, n, tag.substr(0, n)) == 0) return n;
  return 0;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool starts_inside)
    : state_(starts_inside ? State::reasoning : State::before), thought_(starts_inside) {}

ReasoningSplitter::Pieces ReasoningSplitter::push(const std::string& text) {
  pending_ += text;
  Pieces out;
  for (;;) {
    if (state_ == State::before) {
      // Only a reply that starts with <think> (after blanks) thinks.
      const size_t first = pending_.find_first_not_of(" \t\r\n");
      if (first == std::string::npos) return out;
      const std::string_view rest = std::string_view(pending_).substr(first);
      if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return out;  // may still be <think>
      if (rest.substr(0, kOpen.size()) == kOpen) {
        pending_.erase(0, first + kOpen.size());
        state_ = State::reasoning;
        thought_ = true;
      } else {
        state_ = State::content;
      }
      continue;
    }
    if (state_ == State::reasoning) {
      const size_t close = pending_.find(kClose);
      if (close == std::string::npos) {
        const size_t keep = partial_tag(pending_, kClose);
        out.reasoning += pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return out;
      }
      out.reasoning += pending_.substr(0, close);
      pending_.erase(0, close + kClose.size());
      state_ = State::content;
      after_close_ = true;
      continue;
    }
    if (after_close_) {
      const size_t first = pending_.find_first_not_of("\r\n");
      if (first == std::string::npos) {
        pending_.clear();
        return out;
      }
      pending_.erase(0, first);
      after_close_ = false;
    }
    out.content += pending_;
    pending_.clear();
    return out;
  }
}

ReasoningSplitter::Pieces ReasoningSplitter::finish() {
  Pieces out;
  if (state_ == State::reasoning) out.reasoning = pending_;
  else if (!after_close_) out.content = pending_;
  pending_.clear();
  return out;
}

bool prompt_opens_thinking(const std::string& prompt_tail) {
  const size_t open = prompt_tail.rfind(kOpen), close = prompt_tail.rfind(kClose);
  return open != std::string::npos && (close == std::string::npos || close < open);
}

}  // namespace lockstep
