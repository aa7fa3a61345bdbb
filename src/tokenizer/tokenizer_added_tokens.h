// Added tokens (tokenizer.json "added_tokens"): special and extra tokens that are cut out of the
// text before normalization and pre-tokenization, as Hugging Face's AddedVocabulary does.
#pragma once

#include <bitset>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer_regex.h"

namespace lockstep::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;  // match only where no word character touches either end
  bool lstrip = false;       // the match takes the whitespace before it
  bool rstrip = false;       // the match takes the whitespace after it
  bool normalized = true;    // matched in normalized text (else in the raw input)
  bool special = false;      // skipped by decode(skip_special_tokens)
};

// Parses the "added_tokens" list (null: none); fails naming an unknown field.
[[nodiscard]] Expected<std::vector<AddedToken>> parse_added_tokens(const nlohmann::json& json);

// Finds added tokens in text: leftmost match first, the longest of those starting there, then on
// from its end (Aho-Corasick's leftmost-longest, non-overlapping). Immutable once built.
class AddedTokenMatcher {
 public:
  // `patterns[i]` is the text to find for `tokens[i]` (its content, or its content normalized).
  [[nodiscard]] static Expected<AddedTokenMatcher> build(std::vector<std::string> patterns,
                                                         std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }

  // Cuts `text` into plain runs and tokens, in order: emit(piece, id) with id -1 for a plain
  // run (never empty). Thread-safe.
  void split(std::string_view text,
             const std::function<void(std::string_view piece, int32_t id)>& emit) const;

 private:
  AddedTokenMatcher(std::vector<AddedToken> tokens, Regex word_char)
      : tokens_(std::move(tokens)), word_char_(std::move(word_char)) {}
  // The longest pattern starting at text[pos]: (token index, length), or nullopt.
  std::optional<std::pair<size_t, size_t>> longest_at(std::string_view text, size_t pos) const;
  bool is_word_char_before(std::string_view text, size_t pos) const;
  bool is_word_char_at(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  Regex word_char_;  // Rust regex's Unicode \w, for single_word
  // A byte trie of the patterns: node 0 is the root; edges keyed by (node << 8 | byte).
  std::vector<int32_t> node_token_;  // token index ending at each node, or -1
  std::unordered_map<uint64_t, int32_t> edges_;
  std::bitset<256> first_bytes_;
};

}  // namespace lockstep::tokenizer
