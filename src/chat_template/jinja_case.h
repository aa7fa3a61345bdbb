// Python's case mapping and character classes of str (upper, lower, title, capitalize,
// isalpha, ...) and jinja2's title filter, on UTF-8 text. Pure functions; the C.UTF-8 tables
// are opened once and only read.
#pragma once

#include <string>
#include <string_view>

namespace lockstep::jinja {

// Case mapping of str.upper/lower/title/capitalize: the C.UTF-8 locale's one-to-one tables
// (ASCII only where that locale is missing), plus Python's one-to-many mappings of 'ß', the
// Latin ligatures and 'İ'; the other one-to-many mappings (Greek and Armenian) are not made.
[[nodiscard]] std::string python_upper(std::string_view text);
[[nodiscard]] std::string python_lower(std::string_view text);
[[nodiscard]] std::string python_title(std::string_view text);
[[nodiscard]] std::string python_capitalize(std::string_view text);
// jinja2's `title` filter (not str.title): a word starts the text or follows whitespace or one
// of - ( { [ <; its first character is uppercased and the rest lowercased.
[[nodiscard]] std::string jinja_title(std::string_view text);
// str.isalpha / isdigit / isalnum / isupper / islower over all code points (false when empty).
enum class CharClass { kAlpha, kDigit, kAlnum, kUpper, kLower, kSpace };
[[nodiscard]] bool python_is(std::string_view text, CharClass char_class);

}  // namespace lockstep::jinja
