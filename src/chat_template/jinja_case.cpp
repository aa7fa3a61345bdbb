#include "chat_template/jinja_case.h"

#include <locale.h>
#include <wctype.h>

#include "chat_template/jinja_strings.h"

namespace lockstep::jinja {
namespace {

// The C.UTF-8 locale's character tables, opened once and never changed (null when missing).
locale_t unicode_locale() {
  static const locale_t locale = [] {
    locale_t opened = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t{});
    if (!opened) opened = newlocale(LC_CTYPE_MASK, "C.utf8", locale_t{});
    return opened;
  }();
  return locale;
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  locale_t locale = unicode_locale();
  return locale ? static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), locale)) : c;
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  locale_t locale = unicode_locale();
  return locale ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), locale)) : c;
}

// Python's case mappings to more than one character (Unicode SpecialCasing, the
// unconditional Latin ones): upper, title.
struct SpecialCase {
  char32_t c;
  const char* upper;
  const char* title;
};
constexpr SpecialCase kSpecialCases[] = {
    {0x00df, "SS", "Ss"},   {0xfb00, "FF", "Ff"},   {0xfb01, "FI", "Fi"}, {0xfb02, "FL", "Fl"},
    {0xfb03, "FFI", "Ffi"}, {0xfb04, "FFL", "Ffl"}, {0xfb05, "ST", "St"}, {0xfb06, "ST", "St"},
};

enum class Case { kUpper, kLower, kTitle };

void append_case(std::string& out, char32_t c, Case target) {
  if (target == Case::kLower) {
    if (c == 0x0130)
      out += "i\u0307";  // İ -> i + combining dot above
    else
      utf8_append(out, to_lower(c));
    return;
  }
  for (const SpecialCase& special : kSpecialCases) {
    if (special.c == c) {
      out += target == Case::kUpper ? special.upper : special.title;
      return;
    }
  }
  utf8_append(out, to_upper(c));
}

bool has_class(char32_t c, CharClass char_class) {
  locale_t locale = unicode_locale();
  wint_t w = static_cast<wint_t>(c);
  if (c < 0x80 || !locale) {
    int b = c < 0x80 ? static_cast<int>(c) : 0;
    switch (char_class) {
      case CharClass::kAlpha: return (b | 32) >= 'a' && (b | 32) <= 'z';
      case CharClass::kDigit: return b >= '0' && b <= '9';
      case CharClass::kAlnum:
        return has_class(c, CharClass::kAlpha) || has_class(c, CharClass::kDigit);
      case CharClass::kUpper: return b >= 'A' && b <= 'Z';
      case CharClass::kLower: return b >= 'a' && b <= 'z';
      case CharClass::kSpace: return is_python_space(c);
    }
  }
  switch (char_class) {
    case CharClass::kAlpha: return iswalpha_l(w, locale);
    case CharClass::kDigit: return iswdigit_l(w, locale);
    case CharClass::kAlnum: return iswalnum_l(w, locale);
    case CharClass::kUpper: return iswupper_l(w, locale);
    case CharClass::kLower: return iswlower_l(w, locale);
    case CharClass::kSpace: return is_python_space(c);
  }
  return false;
}

bool is_cased(char32_t c) {
  if (to_upper(c) != c || to_lower(c) != c) return true;
  locale_t locale = unicode_locale();
  wint_t w = static_cast<wint_t>(c);
  return c >= 0x80 && locale && (iswupper_l(w, locale) || iswlower_l(w, locale));  // e.g. 'ß'
}

}  // namespace

std::string python_upper(std::string_view text) {
  std::string out;
  for (char32_t c : utf8_decode(text)) append_case(out, c, Case::kUpper);
  return out;
}

std::string python_lower(std::string_view text) {
  std::string out;
  for (char32_t c : utf8_decode(text)) append_case(out, c, Case::kLower);
  return out;
}

std::string python_title(std::string_view text) {
  std::string out;
  bool previous_cased = false;
  for (char32_t c : utf8_decode(text)) {
    append_case(out, c, previous_cased ? Case::kLower : Case::kTitle);
    previous_cased = is_cased(c);
  }
  return out;
}

std::string jinja_title(std::string_view text) {
  std::string out;
  bool word_start = true;
  for (char32_t c : utf8_decode(text)) {
    bool separator = is_python_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (separator)
      utf8_append(out, c);
    else
      append_case(out, c, word_start ? Case::kUpper : Case::kLower);
    word_start = separator;
  }
  return out;
}

std::string python_capitalize(std::string_view text) {
  std::string out;
  bool first = true;
  for (char32_t c : utf8_decode(text)) {
    append_case(out, c, first ? Case::kTitle : Case::kLower);
    first = false;
  }
  return out;
}

bool python_is(std::string_view text, CharClass char_class) {
  std::u32string cps = utf8_decode(text);
  if (cps.empty()) return false;
  if (char_class == CharClass::kUpper || char_class == CharClass::kLower) {
    // Python: at least one cased character, and no cased character of the other case.
    bool any_cased = false;
    for (char32_t c : cps) {
      if (!is_cased(c)) continue;
      any_cased = true;
      if (!has_class(c, char_class)) return false;
    }
    return any_cased;
  }
  for (char32_t c : cps)
    if (!has_class(c, char_class)) return false;
  return true;
}

}  // namespace lockstep::jinja
