#include "grammar/gbnf.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/hex.h"
#include "grammar/json_schema.h"

namespace lockstep {

namespace {

constexpr int kMaxNesting = 128;
constexpr int32_t kMaxRepeat = 1024;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

using Range = std::pair<uint32_t, uint32_t>;  // code points, both ends included

// Appends the UTF-8 bytes of code point `c` (valid, not a surrogate).
void append_utf8(uint32_t c, std::string& out) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

// The code points [lo, hi] (no surrogates) as sequences of byte ranges, one byte range per
// byte of the encoding: cut first where the encoded length changes, then wherever a continuation
// byte would not run over its whole range, so that each piece's bytes vary independently.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && edge < hi) {
      utf8_sequences(lo, edge, out);
      utf8_sequences(edge + 1, hi, out);
      return;
    }
  }
  const int length = hi < 0x80 ? 1 : hi < 0x800 ? 2 : hi < 0x10000 ? 3 : 4;
  for (int i = 1; i < length; ++i) {
    const uint32_t low_bits = (uint32_t(1) << (6 * i)) - 1;  // what the last i bytes carry
    if ((lo & ~low_bits) == (hi & ~low_bits)) continue;
    if ((lo & low_bits) != 0) {
      utf8_sequences(lo, lo | low_bits, out);
      utf8_sequences((lo | low_bits) + 1, hi, out);
      return;
    }
    if ((hi & low_bits) != low_bits) {
      utf8_sequences(lo, (hi & ~low_bits) - 1, out);
      utf8_sequences(hi & ~low_bits, hi, out);
      return;
    }
  }
  std::string first, last;
  append_utf8(lo, first);
  append_utf8(hi, last);
  std::vector<std::pair<uint8_t, uint8_t>> sequence;
  for (size_t i = 0; i < first.size(); ++i) sequence.push_back({uint8_t(first[i]), uint8_t(last[i])});
  out.push_back(std::move(sequence));
}

class GbnfParser {
 public:
  GbnfParser(Grammar& grammar, std::string_view text) : g_(grammar), s_(text) {}

  Expected<int32_t> parse() {
    skip_space(true);
    while (pos_ < s_.size()) {
      const size_t at = pos_;
      const std::string name = parse_name();
      if (name.empty()) return fail("expected a rule name");
      skip_space(false);
      if (s_.substr(pos_, 3) != "::=") return fail("expected '::=' after the rule name '" + name + "'");
      pos_ += 3;
      skip_space(true);
      const int32_t rule = rule_named(name, at);
      if (!defined_.emplace(name).second) return fail_at(at, "the rule '" + name + "' is defined twice");
      Expected<std::vector<std::vector<int32_t>>> alternatives = parse_alternatives(false);
      if (!alternatives.ok()) return alternatives.error();
      for (const std::vector<int32_t>& sequence : *alternatives)
        g_.add_alternative(rule, sequence.empty() ? std::vector<int32_t>{g_.empty()} : sequence);
      if (g_.oversized())
        return make_error("grammar: too large (its rules pass " + std::to_string(kMaxGrammarElements) + " elements)");
      if (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != '\r') return fail("expected the end of the line");
      skip_space(true);
    }
    for (const auto& [name, at] : first_use_)
      if (!defined_.count(name)) return fail_at(at, "the rule '" + name + "' is used but not defined");
    if (!defined_.count("root")) return make_error("grammar: it has no rule named 'root'");
    const int32_t root = rules_.at("root");
    g_.set_root(root);
    if (const int32_t looping = left_recursive_rule(g_); looping >= 0) {
      for (const auto& [name, rule] : rules_)
        if (rule == looping)
          return make_error("grammar: the rule '" + name + "' can come back to itself before matching a character "
                            "(left recursion), which cannot be followed a byte at a time");
      return make_error("grammar: a repeat of something that can match nothing (like (\"a\"?)*), which cannot be "
                        "followed a byte at a time");
    }
    return root;
  }

 private:
  Error fail(const std::string& message) const { return fail_at(pos_, message); }
  Error fail_at(size_t at, const std::string& message) const {
    size_t line = 1, column = 1;  // columns in characters: UTF-8 continuation bytes do not count
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((uint8_t(s_[i]) & 0xC0) != 0x80) {
        ++column;
      }
    }
    return make_error("grammar: line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message);
  }

  // Spaces, tabs and comments; line ends too where `newlines`.
  void skip_space(bool newlines) {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != '\r') ++pos_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }
  std::string parse_name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && name_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  int32_t rule_named(const std::string& name, size_t at) {
    first_use_.try_emplace(name, at);
    auto [found, added] = rules_.try_emplace(name, 0);
    if (added) found->second = g_.declare();
    return found->second;
  }

  Expected<std::vector<std::vector<int32_t>>> parse_alternatives(bool nested) {
    std::vector<std::vector<int32_t>> alternatives;
    for (;;) {
      Expected<std::vector<int32_t>> sequence = parse_sequence(nested);
      if (!sequence.ok()) return sequence.error();
      alternatives.push_back(std::move(*sequence));
      if (pos_ >= s_.size() || s_[pos_] != '|') return alternatives;
      ++pos_;
      skip_space(true);
    }
  }

  Expected<std::vector<int32_t>> parse_sequence(bool nested) {
    std::vector<int32_t> items;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
      Expected<int32_t> item = parse_item();
      if (!item.ok()) return item.error();
      Expected<int32_t> repeated = parse_repeat(*item);
      if (!repeated.ok()) return repeated.error();
      items.push_back(*repeated);
      skip_space(nested);
    }
    return items;
  }

  Expected<int32_t> parse_item() {
    const char c = s_[pos_];
    if (c == '"') return parse_literal();
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return code_points({{0, kMaxCodePoint}});
    }
    if (c == '(') {
      if (++depth_ > kMaxNesting) return fail("parentheses nested deeper than " + std::to_string(kMaxNesting));
      ++pos_;
      skip_space(true);
      Expected<std::vector<std::vector<int32_t>>> alternatives = parse_alternatives(true);
      if (!alternatives.ok()) return alternatives.error();
      if (pos_ >= s_.size() || s_[pos_] != ')') return fail("expected ')'");
      ++pos_;
      --depth_;
      std::vector<int32_t> choices;
      for (const std::vector<int32_t>& sequence : *alternatives)
        choices.push_back(sequence.empty() ? g_.empty() : g_.sequence(sequence));
      return choices.size() == 1 ? choices[0] : g_.choice(choices);
    }
    if (name_char(c)) {
      const size_t at = pos_;
      return rule_named(parse_name(), at);
    }
    return fail(std::string("unexpected '") + c + "'");
  }

  Expected<int32_t> parse_repeat(int32_t item) {
    if (pos_ >= s_.size()) return item;
    const char c = s_[pos_];
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      return g_.repeat(item, c == '+' ? 1 : 0, c == '?' ? 1 : -1);
    }
    if (c != '{') return item;
    ++pos_;
    auto number = [&]() -> int64_t {
      skip_space(false);
      int64_t value = -1;
      for (; pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; ++pos_)
        value = std::min<int64_t>(std::max<int64_t>(value, 0) * 10 + (s_[pos_] - '0'), kMaxRepeat + 1);
      skip_space(false);
      return value;
    };
    const int64_t min = number();
    if (min < 0) return fail("expected a count after '{'");
    int64_t max = min;
    if (pos_ < s_.size() && s_[pos_] == ',') {
      ++pos_;
      max = number();  // -1: no upper bound
    }
    if (pos_ >= s_.size() || s_[pos_] != '}') return fail("expected '}'");
    ++pos_;
    if (min > kMaxRepeat || max > kMaxRepeat)
      return fail("a repeat count over " + std::to_string(kMaxRepeat));
    if (max >= 0 && max < min) return fail("a repeat's maximum is below its minimum");
    return g_.repeat(item, int32_t(min), int32_t(max));
  }

  // One character of a literal or class at pos_ (an escape, or a UTF-8 sequence).
  Expected<uint32_t> parse_char() {
    if (pos_ >= s_.size()) return fail("unexpected end of the grammar");
    const size_t start = pos_;
    const unsigned char c = uint8_t(s_[pos_]);
    if (c == '\\') {
      if (pos_ + 1 >= s_.size()) return fail("unexpected end of the grammar");
      const char e = s_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case 'n': return uint32_t('\n');
        case 'r': return uint32_t('\r');
        case 't': return uint32_t('\t');
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': return uint32_t(uint8_t(e));
        case 'x': return parse_hex(2, start);
        case 'u': return parse_hex(4, start);
        case 'U': return parse_hex(8, start);
        default: return fail_at(start, std::string("unknown escape '\\") + e + "'");
      }
    }
    const int length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || pos_ + size_t(length) > s_.size()) return fail("the grammar is not valid UTF-8");
    uint32_t code = length == 1 ? c : c & (0x7F >> length);
    for (int i = 1; i < length; ++i) {
      const unsigned char next = uint8_t(s_[pos_ + size_t(i)]);
      if ((next & 0xC0) != 0x80) return fail("the grammar is not valid UTF-8");
      code = code << 6 | (next & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are no characters.
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < least[length] || code > kMaxCodePoint || (code >= 0xD800 && code <= 0xDFFF))
      return fail("the grammar is not valid UTF-8");
    pos_ += size_t(length);
    return code;
  }

  Expected<uint32_t> parse_hex(int digits, size_t start) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      if (pos_ >= s_.size()) return fail("expected " + std::to_string(digits) + " hex digits");
      const char h = s_[pos_];
      const int digit = hex_digit(h);
      if (digit < 0) return fail("expected " + std::to_string(digits) + " hex digits");
      value = value * 16 + uint32_t(digit);
    }
    if (value > kMaxCodePoint || (value >= 0xD800 && value <= 0xDFFF))
      return fail_at(start, "escape to a code point that is not a character");
    return value;
  }

  Expected<int32_t> parse_literal() {
    ++pos_;  // the opening quote
    std::string bytes;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      if (s_[pos_] == '\n' || s_[pos_] == '\r') return fail("a literal runs past the end of its line");
      Expected<uint32_t> c = parse_char();
      if (!c.ok()) return c.error();
      append_utf8(*c, bytes);
    }
    if (pos_ >= s_.size()) return fail("a literal has no closing '\"'");
    ++pos_;
    return bytes.empty() ? g_.empty() : g_.literal(bytes);
  }

  Expected<int32_t> parse_class() {
    ++pos_;  // '['
    const bool negated = pos_ < s_.size() && s_[pos_] == '^';
    if (negated) ++pos_;
    std::vector<Range> ranges;
    while (pos_ < s_.size() && s_[pos_] != ']') {
      if (s_[pos_] == '\n' || s_[pos_] == '\r') return fail("a character class runs past the end of its line");
      const size_t range_start = pos_;
      Expected<uint32_t> first = parse_char();
      if (!first.ok()) return first.error();
      uint32_t last = *first;
      if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        Expected<uint32_t> end = parse_char();
        if (!end.ok()) return end.error();
        if (*end < *first) return fail_at(range_start, "a character range runs backwards");
        last = *end;
      }
      ranges.push_back({*first, last});
    }
    if (pos_ >= s_.size()) return fail("a character class has no closing ']'");
    ++pos_;
    if (negated) ranges = complement(std::move(ranges));
    if (ranges.empty()) return fail("a character class that matches no character");
    return code_points(std::move(ranges));
  }

  static std::vector<Range> merged(std::vector<Range> ranges) {
    std::sort(ranges.begin(), ranges.end());
    std::vector<Range> out;
    for (const Range& r : ranges) {
      if (!out.empty() && r.first <= out.back().second + 1) out.back().second = std::max(out.back().second, r.second);
      else out.push_back(r);
    }
    return out;
  }
  static std::vector<Range> complement(std::vector<Range> ranges) {
    std::vector<Range> out;
    uint32_t next = 0;
    for (const Range& r : merged(std::move(ranges))) {
      if (r.first > next) out.push_back({next, r.first - 1});
      next = r.second + 1;
    }
    if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
    return out;
  }

  // A rule matching one character in `ranges` (surrogates never match: they are no characters).
  int32_t code_points(std::vector<Range> ranges) {
    std::vector<Range> characters;
    for (const Range& r : merged(std::move(ranges))) {
      if (r.second < 0xD800 || r.first > 0xDFFF) {
        characters.push_back(r);
        continue;
      }
      if (r.first < 0xD800) characters.push_back({r.first, 0xD7FF});
      if (r.second > 0xDFFF) characters.push_back({0xE000, r.second});
    }
    std::vector<std::vector<std::pair<uint8_t, uint8_t>>> sequences;
    for (const Range& r : characters) utf8_sequences(r.first, r.second, sequences);
    // One-byte pieces join into one byte set.
    ByteSet single;
    bool any_single = false;
    std::vector<int32_t> choices;
    for (const auto& sequence : sequences) {
      if (sequence.size() == 1) {
        single.add_range(sequence[0].first, sequence[0].second);
        any_single = true;
        continue;
      }
      std::vector<int32_t> bytes;
      for (auto [first, last] : sequence) bytes.push_back(g_.bytes(ByteSet().add_range(first, last)));
      choices.push_back(g_.sequence(bytes));
    }
    if (any_single) choices.insert(choices.begin(), g_.bytes(single));
    return choices.size() == 1 ? choices[0] : g_.choice(choices);
  }

  Grammar& g_;
  std::string_view s_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::map<std::string, int32_t> rules_;
  std::map<std::string, size_t> first_use_;  // where each rule is first named
  std::set<std::string> defined_;
};

}  // namespace

Expected<int32_t> add_gbnf(Grammar& grammar, std::string_view text) { return GbnfParser(grammar, text).parse(); }

}  // namespace lockstep
