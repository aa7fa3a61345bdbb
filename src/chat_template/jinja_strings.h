// Python string semantics on UTF-8 text, as the jinja2 templates of chat models see them:
// code-point length and slicing, str.isspace/strip/split, float and string repr, and JSON
// quoting as Python's json.dumps writes it. Pure functions; no locale or global state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::jinja {

// The longest string a template may build (64 MiB): more is a template bug or an attack, never
// a prompt. limit_text() throws TextTooLarge (a std::length_error) past it; render_template
// turns that into an error before anything that size is allocated.
constexpr size_t kMaxTextBytes = size_t{1} << 26;
struct TextTooLarge : std::length_error {
  TextTooLarge() : std::length_error("a string over 64 MiB") {}
};
inline void limit_text(size_t bytes) {
  if (bytes > kMaxTextBytes) throw TextTooLarge();
}

// Walks of a value (repr, tojson, ==, <) go at most kMaxWalkDepth levels deep and visit at most
// kMaxWalkVisits items in one render: a list nested 30,000 deep would overflow the stack, and one
// held twice at each of 60 levels is 2^60 items to compare. Past either, ValueTooLarge, which
// render_template turns into an error. reset_value_walks() starts a render's count.
constexpr int kMaxWalkDepth = 1000;
constexpr int64_t kMaxWalkVisits = 20'000'000;
struct ValueTooLarge : std::length_error {
  ValueTooLarge() : std::length_error("a value too deep or too large to walk") {}
};
void reset_value_walks();

// UTF-8 to code points. A byte that does not start a valid sequence becomes U+DC80+byte (as
// Python's surrogateescape), so that encode(decode(s)) == s for any bytes.
[[nodiscard]] std::u32string utf8_decode(std::string_view text);
[[nodiscard]] std::string utf8_encode(std::u32string_view code_points);
// Appends a code point as UTF-8; U+DC80..U+DCFF (utf8_decode's escapes) go back to their byte.
void utf8_append(std::string& out, char32_t code_point);
[[nodiscard]] size_t code_point_count(std::string_view text);

// Python's str.isspace() for one code point (the Unicode whitespace of str.split() and strip()).
[[nodiscard]] bool is_python_space(char32_t code_point);
// Python's str.strip/lstrip/rstrip: `chars` (a set of code points) or whitespace when absent.
[[nodiscard]] std::string python_strip(std::string_view text,
                                       const std::optional<std::string>& chars, bool left,
                                       bool right);
// Python's str.split(sep, maxsplit); without `sep`, splits on runs of whitespace and drops empty
// pieces. `sep` must not be empty (the caller reports that error). maxsplit < 0: no limit.
[[nodiscard]] std::vector<std::string> python_split(std::string_view text,
                                                    const std::optional<std::string>& sep,
                                                    int64_t maxsplit);
// Python's str.rsplit(sep, maxsplit): as python_split, but the splits are made from the right.
[[nodiscard]] std::vector<std::string> python_rsplit(std::string_view text,
                                                     const std::optional<std::string>& sep,
                                                     int64_t maxsplit);
// Python's str.splitlines(keepends): breaks at \n, \r, \r\n, \v, \f, \x1c-\x1e, U+0085,
// U+2028 and U+2029.
[[nodiscard]] std::vector<std::string> python_splitlines(std::string_view text, bool keepends);
// Python's str.replace(old, new, count); count < 0: all occurrences.
[[nodiscard]] std::string python_replace(std::string_view text, std::string_view old_text,
                                         std::string_view new_text, int64_t count);

// repr(float) as Python prints it: shortest round-trip digits, "1.0", "1e+16", "1e-05", "nan".
[[nodiscard]] std::string python_float_repr(double value);
// repr(str): single quotes unless the text holds ' and no ", with Python's escapes.
[[nodiscard]] std::string python_string_repr(std::string_view text);
// A JSON string literal as json.dumps writes it; ensure_ascii escapes every non-ASCII code point
// as \uXXXX (surrogate pairs above U+FFFF).
[[nodiscard]] std::string json_quote(std::string_view text, bool ensure_ascii);

}  // namespace lockstep::jinja
