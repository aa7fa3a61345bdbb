// Stop strings: the reply ends just before the first one, and text that could still grow
// into one is held back, so a partial stop string never reaches the client.
#pragma once

#include <string>
#include <vector>

namespace lockstep {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds newly decoded text and returns the text now safe to send. Once a stop string has
  // appeared, stopped() is true and the returned text ends just before it.
  std::string push(const std::string& text);
  // At the end of the stream: whatever was held back (nothing once stopped).
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace lockstep
