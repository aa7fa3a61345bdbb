// The regular expressions of tokenizer.json (Split patterns, Replace patterns), run with PCRE2 in
// UTF and UCP mode. Hugging Face compiles them with Oniguruma; the one difference that matters
// for these patterns, `\s` also matching U+0085 (NEL) there, is patched into the pattern.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace lockstep::tokenizer {

class Regex {
 public:
  // Compiles `pattern`; fails naming the pattern, the offset and PCRE2's message.
  [[nodiscard]] static Expected<Regex> compile(std::string_view pattern);
  // A pattern matching `literal` exactly.
  static std::string escape(std::string_view literal);

  // Calls found(start, end) for each non-overlapping match in `text`, left to right, as
  // Oniguruma's find_iter does (after an empty match the search moves on one character).
  // `text` must be valid UTF-8. Thread-safe: each call uses its own match state.
  void for_each_match(std::string_view text,
                      const std::function<void(size_t start, size_t end)>& found) const;

  // Whether the pattern matches somewhere in `text`.
  bool search(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  Regex(std::string pattern, std::shared_ptr<const Code> code)
      : pattern_(std::move(pattern)), code_(std::move(code)) {}

  std::string pattern_;
  std::shared_ptr<const Code> code_;  // immutable once compiled, so copies share it
};

// A Replace step (normalizer or decoder): every non-overlapping match of a literal string or a
// regex, left to right, becomes fixed content.
class Replacement {
 public:
  Replacement(std::string literal, std::string content)
      : literal_(std::move(literal)), content_(std::move(content)) {}
  Replacement(Regex regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}

  std::string apply(std::string_view text) const;

 private:
  std::string literal_;
  std::optional<Regex> regex_;
  std::string content_;
};

}  // namespace lockstep::tokenizer
