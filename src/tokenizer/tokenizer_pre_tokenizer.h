// The pre-tokenizers of tokenizer.json: Split (by a string or a regex), ByteLevel, Digits,
// Metaspace and a Sequence of them. A pre-tokenizer cuts normalized text into the words the
// model encodes one at a time (and ByteLevel also rewrites each byte as its printable stand-in
// character; Metaspace each space as "▁").
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/status.h"

namespace lockstep::tokenizer {

// Receives the pieces of a pre-tokenized text, in order; never an empty one. The view is valid
// only during the call.
using PieceSink = std::function<void(std::string_view piece)>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Passes the pieces of `text` (valid UTF-8) to `emit`. `at_input_start`: `text` begins the
  // input (no added token or other text before it), which Metaspace's "first" prepend scheme
  // asks. Const and thread-safe.
  virtual void split(std::string_view text, bool at_input_start, const PieceSink& emit) const = 0;
};

// Builds the pre-tokenizer a tokenizer.json "pre_tokenizer" value describes: nullptr for null,
// an error naming any unsupported type or option.
[[nodiscard]] Expected<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(
    const nlohmann::json& json);

}  // namespace lockstep::tokenizer
