// The normalizers of tokenizer.json: NFC, NFD, Replace, Prepend and Sequence of them. A
// normalizer rewrites each piece of input text between added tokens before pre-tokenization.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace lockstep::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is valid UTF-8; so is the result. Const and thread-safe.
  virtual std::string normalize(std::string_view text) const = 0;
};

// Builds the normalizer a tokenizer.json "normalizer" value describes: nullptr for null (or an
// empty Sequence), an error naming any unsupported type or option.
[[nodiscard]] Expected<std::unique_ptr<Normalizer>> parse_normalizer(const nlohmann::json& json);

}  // namespace lockstep::tokenizer
