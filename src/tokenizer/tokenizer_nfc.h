// Unicode canonical normalization (NFC and NFD), for the tokenizer's NFC/NFD normalizers.
// Unicode 14.0.0 data, the version PCRE2 uses for the pre-tokenizer patterns.
#pragma once

#include <string>
#include <string_view>

namespace lockstep::tokenizer {

// Canonical decomposition then canonical composition. `text` must be valid UTF-8. Linear in the
// input: text is cut before characters that no neighbour can change, and only pieces holding
// something normalization can touch are worked on. Thread-safe (the tables are immutable).
std::string nfc(std::string_view text);

// Canonical decomposition, with combining marks put in canonical order.
std::string nfd(std::string_view text);

}  // namespace lockstep::tokenizer
