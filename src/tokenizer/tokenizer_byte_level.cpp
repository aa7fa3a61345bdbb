#include "tokenizer/tokenizer_byte_level.h"

#include "base/utf8.h"

namespace lockstep::tokenizer {

ByteLevelAlphabet::ByteLevelAlphabet() {
  for (int16_t& byte : bytes_) byte = -1;
  // Printable Latin-1 bytes stand for themselves; the others take code points from U+0100 on,
  // in byte order.
  char32_t next_spare = 256;
  for (int byte = 0; byte < 256; ++byte) {
    bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                     (byte >= 0xAE && byte <= 0xFF);
    char32_t code_point = printable ? static_cast<char32_t>(byte) : next_spare++;
    utf8_append(chars_[byte], code_point);
    bytes_[code_point] = static_cast<int16_t>(byte);
  }
}

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

void ByteLevelAlphabet::encode(std::string_view text, std::string& out) const {
  for (char c : text) out.append(chars_[static_cast<uint8_t>(c)]);
}

}  // namespace lockstep::tokenizer
