#include "tokenizer/tokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "base/utf8.h"

namespace lockstep::tokenizer {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int error_code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(error_code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

// Rewrites Oniguruma's `\s` (which includes U+0085) for PCRE2 (whose UCP `\s` does not).
Expected<std::string> patch_whitespace(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char next = pattern[++i];
      if (next == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (next == 'S') {
        if (in_class) return Error{"\\S inside a character class is not supported"};
        out += "[^\\s\\x{85}]";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[') return Error{"nested character classes are not supported"};
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
  // Long runs can outgrow the JIT's default 32 KiB stack; retry with a large one.
  void grow_jit_stack() {
    if (jit_stack) return;
    jit_stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
};

// Matches from `start`: a non-negative result on a match, PCRE2_ERROR_NOMATCH otherwise. A
// pattern that exhausts PCRE2's resources even with the fallbacks is a bug in the tokenizer file
// (catastrophic backtracking); that aborts loudly rather than mis-tokenize in silence.
int match_at(const pcre2_code* code, std::string_view text, size_t start, MatchState& state) {
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.data,
                       state.context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !state.jit_stack) {
    state.grow_jit_stack();
    rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.data,
                     state.context);
  }
  if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH) return rc;
  // Last resort: the interpreter, without its match and memory limits.
  pcre2_match_context* unlimited = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(unlimited, UINT32_MAX);
  pcre2_set_depth_limit(unlimited, UINT32_MAX);
  pcre2_set_heap_limit(unlimited, UINT32_MAX);
  rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                   state.data, unlimited);
  pcre2_match_context_free(unlimited);
  if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH) return rc;
  std::fprintf(stderr, "tokenizer regex: PCRE2 failed on a %zu-byte text: %s\n", text.size(),
               pcre2_message(rc).c_str());
  std::abort();
}

}  // namespace

Expected<Regex> Regex::compile(std::string_view pattern) {
  Expected<std::string> patched = patch_whitespace(pattern);
  if (!patched.ok())
    return Error{"regex /" + std::string(pattern) + "/: " + patched.error().message};
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  auto code = std::make_shared<Code>();
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(patched->data()), patched->size(),
                             PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (!code->code)
    return Error{"regex /" + std::string(pattern) + "/: " + pcre2_message(error_code) +
                 " at offset " + std::to_string(error_offset) + " of the PCRE2 form"};
  pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);  // if JIT is unavailable, interpret
  return Regex(std::string(pattern), std::move(code));
}

std::string Regex::escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#&~ ").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

void Regex::for_each_match(std::string_view text,
                           const std::function<void(size_t, size_t)>& found) const {
  MatchState state;
  state.data = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  size_t start = 0;
  while (start <= text.size()) {
    int rc = match_at(code_->code, text, start, state);
    if (rc < 0) break;  // no further match
    PCRE2_SIZE* offsets = pcre2_get_ovector_pointer(state.data);
    size_t begin = offsets[0], end = offsets[1];
    found(begin, end);
    if (end > begin) {
      start = end;
    } else {
      if (end >= text.size()) break;
      start = end + utf8_step(text, end).length;
    }
  }
}

bool Regex::search(std::string_view text) const {
  MatchState state;
  state.data = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  return match_at(code_->code, text, 0, state) >= 0;
}

std::string Replacement::apply(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  size_t copied_to = 0;
  if (regex_) {
    regex_->for_each_match(text, [&](size_t start, size_t end) {
      out.append(text.substr(copied_to, start - copied_to)).append(content_);
      copied_to = end;
    });
  } else if (!literal_.empty()) {
    for (size_t at = text.find(literal_); at != std::string_view::npos;
         at = text.find(literal_, copied_to)) {
      out.append(text.substr(copied_to, at - copied_to)).append(content_);
      copied_to = at + literal_.size();
    }
  }
  out.append(text.substr(copied_to));
  return out;
}

}  // namespace lockstep::tokenizer
