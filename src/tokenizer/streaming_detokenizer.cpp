#include "tokenizer/streaming_detokenizer.h"

#include <optional>

#include "tokenizer/tokenizer.h"

namespace lockstep {

std::string StreamingDetokenizer::push(int32_t id) {
  std::optional<std::string_view> token = tokenizer_.id_to_token(id);
  if (!token || (skip_special_tokens_ && tokenizer_.is_special(id))) return std::string();
  // A longer run of byte tokens is held back whole: nothing to decode yet.
  const bool held = !pending_.empty() && tokenizer_.extends_byte_run(pending_.back(), *token);
  pending_.push_back(*token);
  if (held) return std::string();
  tokenizer::DecodedText decoded = tokenizer_.decode_tokens(pending_, continuation_);
  std::string fresh = decoded.text.substr(emitted_, decoded.stable_bytes - emitted_);
  emitted_ = decoded.stable_bytes;
  if (decoded.stable_bytes == decoded.text.size()) {
    // Everything so far is final, and the decoders decode across this point piecewise: start
    // afresh so that each push costs only the tokens since.
    pending_.clear();
    emitted_ = 0;
    continuation_ = true;
  }
  return fresh;
}

std::string StreamingDetokenizer::finish() {
  std::string rest;
  if (!pending_.empty()) rest = tokenizer_.decode_tokens(pending_, continuation_).text.substr(emitted_);
  pending_.clear();
  emitted_ = 0;
  continuation_ = false;
  return rest;
}

}  // namespace lockstep
