// Turns generated ids into text as they arrive. Never emits half a UTF-8 sequence, and never
// takes back what it emitted: the concatenation of every push() and the final finish() equals
// Tokenizer::decode of all the ids with the same skip_special_tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

class Tokenizer;

// One stream; not thread-safe. Holds a reference to `tokenizer`, which must outlive it.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // Adds one id and returns the text it completes (often empty). Text is held back while a later
  // id could still change it: the unfinished bytes of a character (byte-level tokens), or a run
  // of byte-fallback tokens (in Hugging Face's ByteFallback one bad byte later turns the whole
  // run into U+FFFD, so a run is emitted only when a normal token or finish() ends it). Ids with
  // no token, and special tokens when skipping them, add nothing.
  std::string push(int32_t id);

  // Returns whatever is held back, decoded as decode() would at the end of the ids (an
  // unfinished character becomes U+FFFD), and starts a new stream.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<std::string_view> pending_;  // tokens since the last point where all was final
  size_t emitted_ = 0;                      // bytes of decoding pending_ already returned
  bool continuation_ = false;               // pending_ follows tokens already decoded
};

}  // namespace lockstep
