#include "base/utf8.h"

#include <cstdint>

namespace lockstep {

Utf8Step utf8_step(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  uint8_t lead = byte(pos);
  if (lead < 0x80) return Utf8Step{lead, 1, true, false};

  // Continuation bytes needed, and the allowed range of the first one (which excludes overlong
  // forms, surrogates and values past U+10FFFF).
  int needed;
  uint8_t low = 0x80, high = 0xBF;
  char32_t value;
  if (lead >= 0xC2 && lead <= 0xDF) {
    needed = 1, value = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    needed = 2, value = lead & 0x0F;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    needed = 3, value = lead & 0x07;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return Utf8Step{};  // a continuation byte or a lead that never starts a character
  }

  size_t length = 1;
  for (int i = 0; i < needed; ++i) {
    if (pos + length >= text.size()) return Utf8Step{0, length, false, true};
    uint8_t next = byte(pos + length);
    if (next < low || next > high) return Utf8Step{0, length, false, false};
    value = (value << 6) | (next & 0x3F);
    ++length;
    low = 0x80, high = 0xBF;
  }
  return Utf8Step{value, length, true, false};
}

void utf8_append(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

bool utf8_is_valid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    Utf8Step step = utf8_step(text, pos);
    if (!step.valid) return false;
    pos += step.length;
  }
  return true;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    Utf8Step step = utf8_step(bytes, pos);
    if (step.valid)
      out.append(bytes.substr(pos, step.length));
    else
      out.append("\xEF\xBF\xBD");
    pos += step.length;
  }
  return out;
}

size_t utf8_unfinished_tail(std::string_view bytes) {
  // A lead byte always starts a new scan step (it never continues another character), so only
  // the last lead byte within reach of the end matters.
  for (size_t back = 1; back <= 3 && back <= bytes.size(); ++back) {
    size_t pos = bytes.size() - back;
    uint8_t byte = static_cast<uint8_t>(bytes[pos]);
    if (byte >= 0x80 && byte <= 0xBF) continue;
    return utf8_step(bytes, pos).truncated ? back : 0;
  }
  return 0;
}

}  // namespace lockstep
