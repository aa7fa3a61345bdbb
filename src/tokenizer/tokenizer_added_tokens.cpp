#include "tokenizer/tokenizer_added_tokens.h"

#include <algorithm>

#include "tokenizer/tokenizer_json_options.h"
#include "base/utf8.h"

namespace lockstep::tokenizer {
namespace {

// Unicode White_Space (Rust's char::is_whitespace and regex \s).
bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

size_t char_start_before(std::string_view text, size_t pos) {
  size_t start = pos - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return start;
}

}  // namespace

Expected<std::vector<AddedToken>> parse_added_tokens(const nlohmann::json& json) {
  std::vector<AddedToken> tokens;
  if (json.is_null()) return tokens;
  if (!json.is_array()) return Error{"added_tokens is not a list"};
  for (const nlohmann::json& entry : json) {
    if (!entry.is_object() || !entry.contains("id") || !token_id(entry["id"]) || !entry.contains("content") ||
        !entry["content"].is_string())
      return Error{"added_tokens: entry without an id (0 to 2^31-1) and a content: " + entry.dump()};
    std::string what = "added token " + entry["content"].dump();
    LOCKSTEP_TRY(check_keys(entry, what,
                            {"id", "content", "single_word", "lstrip", "rstrip", "normalized",
                             "special"}));
    AddedToken token;
    token.id = *token_id(entry["id"]);
    token.content = entry["content"].get<std::string>();
    if (token.id < 0) return Error{what + ": negative id"};
    bool* flags[] = {&token.single_word, &token.lstrip, &token.rstrip, &token.normalized,
                     &token.special};
    const char* names[] = {"single_word", "lstrip", "rstrip", "normalized", "special"};
    for (int i = 0; i < 5; ++i) {
      Expected<bool> value = bool_option(entry, what, names[i], *flags[i]);
      LOCKSTEP_TRY(value);
      *flags[i] = *value;
    }
    tokens.push_back(std::move(token));
  }
  return tokens;
}

Expected<AddedTokenMatcher> AddedTokenMatcher::build(std::vector<std::string> patterns,
                                                     std::vector<AddedToken> tokens) {
  Expected<Regex> word_char = Regex::compile("[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]");
  LOCKSTEP_TRY(word_char);
  AddedTokenMatcher matcher(std::move(tokens), std::move(word_char).value());
  matcher.node_token_.push_back(-1);
  for (size_t index = 0; index < patterns.size(); ++index) {
    const std::string& pattern = patterns[index];
    if (pattern.empty()) continue;
    matcher.first_bytes_.set(static_cast<uint8_t>(pattern[0]));
    int32_t node = 0;
    for (char c : pattern) {
      uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
      auto [edge, added] = matcher.edges_.try_emplace(key, 0);
      if (added) {
        edge->second = static_cast<int32_t>(matcher.node_token_.size());
        matcher.node_token_.push_back(-1);
      }
      node = edge->second;
    }
    // A pattern listed twice keeps its first token.
    if (matcher.node_token_[node] < 0) matcher.node_token_[node] = static_cast<int32_t>(index);
  }
  return matcher;
}

std::optional<std::pair<size_t, size_t>> AddedTokenMatcher::longest_at(std::string_view text,
                                                                       size_t pos) const {
  std::optional<std::pair<size_t, size_t>> best;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto edge = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[i]));
    if (edge == edges_.end()) break;
    node = edge->second;
    if (node_token_[node] >= 0) best = {static_cast<size_t>(node_token_[node]), i + 1 - pos};
  }
  return best;
}

bool AddedTokenMatcher::is_word_char_before(std::string_view text, size_t pos) const {
  if (pos == 0) return false;
  size_t start = char_start_before(text, pos);
  return word_char_.search(text.substr(start, pos - start));
}

bool AddedTokenMatcher::is_word_char_at(std::string_view text, size_t pos) const {
  if (pos >= text.size()) return false;
  return word_char_.search(text.substr(pos, utf8_step(text, pos).length));
}

void AddedTokenMatcher::split(
    std::string_view text, const std::function<void(std::string_view, int32_t)>& emit) const {
  size_t written = 0;  // text before this has been emitted
  size_t search_from = 0;
  while (search_from < text.size()) {
    std::optional<std::pair<size_t, size_t>> found;
    size_t start = search_from;
    for (; start < text.size(); ++start) {
      if (!first_bytes_.test(static_cast<uint8_t>(text[start]))) continue;
      if ((found = longest_at(text, start))) break;
    }
    if (!found) break;
    const AddedToken& token = tokens_[found->first];
    size_t stop = start + found->second;
    search_from = stop;  // the next search starts after the match itself, whatever it strips
    if (token.single_word && (is_word_char_before(text, start) || is_word_char_at(text, stop)))
      continue;
    if (token.lstrip) {
      while (start > written) {
        size_t previous = char_start_before(text, start);
        if (!is_white_space(utf8_step(text, previous).code_point)) break;
        start = previous;
      }
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        Utf8Step step = utf8_step(text, stop);
        if (!is_white_space(step.code_point)) break;
        stop += step.length;
      }
    }
    if (stop <= written) continue;  // inside whitespace an earlier token already took
    start = std::max(start, written);
    if (start > written) emit(text.substr(written, start - written), -1);
    emit(text.substr(start, stop - start), token.id);
    written = stop;
  }
  if (written < text.size()) emit(text.substr(written), -1);
}

}  // namespace lockstep::tokenizer
