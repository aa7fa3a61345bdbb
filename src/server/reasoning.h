// A chat reply's thinking, apart from its answer: templates that think (Qwen3, DeepSeek R1,
// Nemotron) have the model write <think>...</think> before the answer, or open <think> in the
// prompt itself. The text inside goes to `reasoning_content`, the rest (less the newlines that
// follow </think>) to `content`. Text that could still grow into a tag is held back, so a
// partial tag never reaches the client.
#pragma once

#include <string>
#include <vector>

namespace lockstep {

class ReasoningSplitter {
 public:
  // starts_inside: the prompt ended inside an open <think> (prompt_opens_thinking).
  explicit ReasoningSplitter(bool starts_inside);

  struct Pieces {
    std::string reasoning, content;
  };
  // Adds newly decoded text; returns what is now safe to send, split.
  Pieces push(const std::string& text);
  // At the end of the reply: whatever was held back (an unclosed <think> is all reasoning).
  Pieces finish();
  // Whether the reply had a think block (reasoning_content belongs in it, even if empty).
  bool thought() const { return thought_; }
  // Whether the text so far ends inside the think block.
  bool thinking() const { return state_ == State::reasoning; }

 private:
  enum class State { before, reasoning, content };
  State state_;
  std::string pending_;
  bool thought_ = false;
  bool after_close_ = false;  // content right after </think>: its leading newlines are dropped
};

// Whether a prompt's text ends inside an open <think> (its last <think> after its last </think>).
bool prompt_opens_thinking(const std::string& prompt_tail);

}  // namespace lockstep
