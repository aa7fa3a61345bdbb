// UTF-8 as the tokenizer and the chat templates need it: stepping through code points, and turning arbitrary bytes into
// valid text exactly as Rust's String::from_utf8_lossy does (Hugging Face's decoders use it).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lockstep {

// One step of a UTF-8 scan at some position.
struct Utf8Step {
  char32_t code_point = 0;  // valid only when `valid`
  size_t length = 1;        // bytes consumed: the character, or the maximal invalid subpart
  bool valid = false;
  bool truncated = false;   // invalid only because the text ends inside a well-formed prefix
};

// Reads the character starting at text[pos] (pos < text.size()). An ill-formed sequence consumes
// its "maximal subpart" (Unicode's substitution practice, which from_utf8_lossy follows).
Utf8Step utf8_step(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of `code_point` (a Unicode scalar value).
void utf8_append(std::string& out, char32_t code_point);

bool utf8_is_valid(std::string_view text);

// `bytes` with each ill-formed subpart replaced by U+FFFD, as from_utf8_lossy.
std::string utf8_lossy(std::string_view bytes);

// How many trailing bytes of `bytes` are a well-formed but unfinished character (0 to 3): bytes
// that a later byte could still complete. Everything before them decodes the same whatever
// follows.
size_t utf8_unfinished_tail(std::string_view bytes);

}  // namespace lockstep
