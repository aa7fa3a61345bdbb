// One hexadecimal digit's value: the percent escapes of a path, "<0xAB>" byte tokens, the \u
// and \x escapes of GBNF and Jinja strings.
#pragma once

namespace lockstep {

// 0 to 15 for '0'-'9', 'a'-'f' and 'A'-'F'; -1 for any other character.
constexpr int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace lockstep
