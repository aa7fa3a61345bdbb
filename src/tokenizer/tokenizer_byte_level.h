// GPT-2's byte-level alphabet: every byte stands as one printable character, so that BPE over
// bytes can work with strings. Used by the ByteLevel pre-tokenizer and decoder.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep::tokenizer {

class ByteLevelAlphabet {
 public:
  // The one immutable instance; thread-safe.
  static const ByteLevelAlphabet& get();

  // The stand-in character for `byte`, as UTF-8.
  std::string_view char_of(uint8_t byte) const { return chars_[byte]; }
  // The byte that `code_point` stands for, or -1 if it stands for none.
  int byte_of(char32_t code_point) const {
    return code_point < sizeof bytes_ / sizeof bytes_[0] ? bytes_[code_point] : -1;
  }
  // Appends the stand-ins for every byte of `text`.
  void encode(std::string_view text, std::string& out) const;

 private:
  ByteLevelAlphabet();

  std::string chars_[256];
  int16_t bytes_[324];  // every stand-in is below U+0144
};

}  // namespace lockstep::tokenizer
