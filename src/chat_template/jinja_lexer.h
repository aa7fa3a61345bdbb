// Splits a template into tokens: text, tag delimiters and the tokens of the expressions inside
// tags. Whitespace control is applied here, as jinja2's lexer applies it with the settings of
// Hugging Face's chat templates: trim_blocks (the first newline after a block or comment tag is
// dropped), lstrip_blocks (spaces and tabs from the start of a line up to a block or comment tag
// are dropped), `-` on a delimiter (all whitespace on that side is dropped) and `+` on an opening
// block delimiter (lstrip_blocks is not applied). Line breaks are normalised to "\n" and one
// trailing newline of the template is dropped (keep_trailing_newline=False).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lockstep::jinja {

// 1-based line and column (in code points) of a token in the template.
struct SourcePos {
  int line = 1;
  int column = 1;
};

// "chat template line L, column C: message" (left as is when it already names a place).
[[nodiscard]] Error error_at(SourcePos pos, const std::string& message);

enum class TokenKind {
  kText,           // literal output
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifiers and keywords (if, for, true, none, ...)
  kString,         // text holds the unescaped value
  kInteger,
  kFloat,
  kOperator,  // text holds the operator: + - * / // % ** ~ ( ) [ ] { } , . : | = == != < <= > >=
  kEnd,       // end of the template
};

struct Token {
  TokenKind kind;
  std::string text;
  int64_t integer = 0;
  double number = 0.0;
  SourcePos pos;
};

// Tokens of the whole template, ending with kEnd. Fails on an unclosed tag, comment or string
// and on a character that starts no token.
[[nodiscard]] Expected<std::vector<Token>> tokenize(std::string_view source);

}  // namespace lockstep::jinja
