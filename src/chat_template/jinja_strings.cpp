#include "chat_template/jinja_strings.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "base/utf8.h"

namespace lockstep::jinja {

std::u32string utf8_decode(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const Utf8Step step = utf8_step(text, i);
    if (step.valid) {
      out.push_back(step.code_point);
      i += step.length;
    } else {  // Python's surrogateescape: one lone surrogate per byte, undone by utf8_append
      out.push_back(0xdc00 + static_cast<unsigned char>(text[i]));
      ++i;
    }
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) {
  if (c >= 0xdc80 && c <= 0xdcff)
    out.push_back(static_cast<char>(c - 0xdc00));
  else
    lockstep::utf8_append(out, c);
}

std::string utf8_encode(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t c : code_points) utf8_append(out, c);
  return out;
}

size_t code_point_count(std::string_view text) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  return ascii ? text.size() : utf8_decode(text).size();
}

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

std::string python_strip(std::string_view text, const std::optional<std::string>& chars, bool left,
                         bool right) {
  if (!chars) {  // ASCII edges: strip bytes; a non-ASCII edge byte needs the full decode below
    size_t begin = 0, end = text.size();
    auto ascii_space = [](char c) { return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20); };
    while (left && begin < end && ascii_space(text[begin])) ++begin;
    while (right && end > begin && ascii_space(text[end - 1])) --end;
    bool edges_ascii = (!left || begin == end || static_cast<unsigned char>(text[begin]) < 0x80) &&
                       (!right || begin == end || static_cast<unsigned char>(text[end - 1]) < 0x80);
    if (edges_ascii) return std::string(text.substr(begin, end - begin));
  }
  std::u32string cps = utf8_decode(text);
  std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strippable = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_python_space(c);
  };
  size_t begin = 0, end = cps.size();
  while (left && begin < end && strippable(cps[begin])) ++begin;
  while (right && end > begin && strippable(cps[end - 1])) --end;
  return utf8_encode(std::u32string_view(cps).substr(begin, end - begin));
}

std::vector<std::string> python_split(std::string_view text, const std::optional<std::string>& sep,
                                      int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      size_t found = text.find(*sep, start);
      if (found == std::string_view::npos) break;
      parts.emplace_back(text.substr(start, found - start));
      start = found + sep->size();
    }
    parts.emplace_back(text.substr(start));
    return parts;
  }
  std::u32string cps = utf8_decode(text);
  size_t i = 0;
  while (true) {
    while (i < cps.size() && is_python_space(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {  // the rest, as is
      parts.push_back(utf8_encode(std::u32string_view(cps).substr(i)));
      break;
    }
    size_t start = i;
    while (i < cps.size() && !is_python_space(cps[i])) ++i;
    parts.push_back(utf8_encode(std::u32string_view(cps).substr(start, i - start)));
  }
  return parts;
}

std::vector<std::string> python_rsplit(std::string_view text, const std::optional<std::string>& sep,
                                       int64_t maxsplit) {
  if (maxsplit < 0) return python_split(text, sep, maxsplit);
  // Split the reversed text with the reversed separator, then reverse the pieces back.
  std::u32string reversed = utf8_decode(text);
  std::reverse(reversed.begin(), reversed.end());
  std::optional<std::string> reversed_sep;
  if (sep) {
    std::u32string s = utf8_decode(*sep);
    std::reverse(s.begin(), s.end());
    reversed_sep = utf8_encode(s);
  }
  std::vector<std::string> parts = python_split(utf8_encode(reversed), reversed_sep, maxsplit);
  for (std::string& part : parts) {
    std::u32string p = utf8_decode(part);
    std::reverse(p.begin(), p.end());
    part = utf8_encode(p);
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> python_splitlines(std::string_view text, bool keepends) {
  std::vector<std::string> lines;
  std::u32string cps = utf8_decode(text);
  size_t start = 0, i = 0;
  while (i < cps.size()) {
    char32_t c = cps[i];
    bool is_break = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) ||
                    c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!is_break) {
      ++i;
      continue;
    }
    size_t end = i;
    i += (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ? 2 : 1;
    lines.push_back(
        utf8_encode(std::u32string_view(cps).substr(start, (keepends ? i : end) - start)));
    start = i;
  }
  if (start < cps.size()) lines.push_back(utf8_encode(std::u32string_view(cps).substr(start)));
  return lines;
}

std::string python_replace(std::string_view text, std::string_view old_text,
                           std::string_view new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {  // Python inserts `new` between every code point and at both ends
    std::u32string cps = utf8_decode(text);
    int64_t made = 0;
    for (char32_t c : cps) {
      if (count < 0 || made < count) out.append(new_text), ++made;
      limit_text(out.size());
      utf8_append(out, c);
    }
    if (count < 0 || made < count) out.append(new_text);
    return out;
  }
  size_t start = 0;
  int64_t made = 0;
  while (count < 0 || made < count) {
    size_t found = text.find(old_text, start);
    if (found == std::string_view::npos) break;
    out.append(text.substr(start, found - start)).append(new_text);
    limit_text(out.size());
    start = found + old_text.size();
    ++made;
  }
  out.append(text.substr(start));
  return out;
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  auto [end, error] =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string scientific(buffer, end);  // shortest round-trip digits: "-1.2345e+02"
  bool negative = scientific[0] == '-';
  size_t e = scientific.find('e');
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (scientific[i] != '.') digits.push_back(scientific[i]);
  int exponent = std::atoi(scientific.c_str() + e + 1);
  int point = exponent + 1;  // value = 0.DIGITS * 10^point
  std::string out = negative ? "-" : "";
  if (point > -4 && point <= 16) {  // fixed notation, always with a fractional part
    if (point <= 0) {
      out += "0." + std::string(-point, '0') + digits;
    } else if (static_cast<size_t>(point) >= digits.size()) {
      out += digits + std::string(point - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, point) + "." + digits.substr(point);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exponent_text[16];
  std::snprintf(exponent_text, sizeof exponent_text, "e%c%02d", exponent < 0 ? '-' : '+',
                std::abs(exponent));
  return out + exponent_text;
}

std::string python_string_repr(std::string_view text) {
  bool has_single = text.find('\'') != std::string_view::npos;
  bool has_double = text.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(text)) {
    char escaped[16];
    if (c == '\\' || c == static_cast<char32_t>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad || (c >= 0x2000 && c <= 0x200f) ||
               (c >= 0x2028 && c <= 0x202f) || (c >= 0x205f && c <= 0x206f) || c == 0x3000 ||
               c == 0xfeff || (c >= 0xd800 && c <= 0xdfff)) {  // not printable in Python's sense
      std::snprintf(escaped, sizeof escaped, c < 0x100 ? "\\x%02x" : "\\u%04x",
                    static_cast<unsigned>(c));
      out += escaped;
    } else {
      utf8_append(out, c);
    }
  }
  out += quote;
  return out;
}

std::string json_quote(std::string_view text, bool ensure_ascii) {
  std::string out = "\"";
  char escaped[16];
  for (char32_t c : utf8_decode(text)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x80 && c < 0x10000)) {
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else if (ensure_ascii && c >= 0x10000) {
      char32_t v = c - 0x10000;
      std::snprintf(escaped, sizeof escaped, "\\u%04x\\u%04x", 0xd800 + (v >> 10),
                    0xdc00 + (v & 0x3ff));
      out += escaped;
    } else {
      utf8_append(out, c);
    }
  }
  out += '"';
  return out;
}

}  // namespace lockstep::jinja
