#include "chat_template/jinja_lexer.h"

#include <algorithm>
#include <cerrno>
#include <optional>

#include "base/hex.h"
#include "chat_template/jinja_strings.h"

namespace lockstep::jinja {

Error error_at(SourcePos pos, const std::string& message) {
  static constexpr std::string_view kPrefix = "chat template line ";
  if (message.compare(0, kPrefix.size(), kPrefix) == 0) return Error{message};
  return Error{std::string(kPrefix) + std::to_string(pos.line) + ", column " +
               std::to_string(pos.column) + ": " + message};
}

namespace {

// \r\n, \r and \n become \n; one trailing newline is dropped.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool all_space(std::string_view text) {
  std::u32string cps = utf8_decode(text);
  return !cps.empty() && std::all_of(cps.begin(), cps.end(), is_python_space);
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  Expected<std::vector<Token>> run();

 private:
  SourcePos pos_at(size_t index) const;
  bool starts_with(size_t at, std::string_view text) const {
    return src_.compare(at, text.size(), text) == 0;
  }
  size_t skip_space(size_t at) const;
  // Applies `-` / lstrip_blocks to the text before a delimiter and emits it.
  void emit_text(std::string text, size_t text_begin, char sign, bool lstrip_applies);
  void push(TokenKind kind, std::string text, size_t at) {
    tokens_.push_back(Token{kind, std::move(text), 0, 0.0, pos_at(at)});
  }
  Status lex_comment(size_t open, size_t after);
  Status lex_raw(size_t open, size_t body);
  Status lex_tag(bool block, size_t open);
  Status lex_number();
  Status lex_string();
  // Where a `{% raw %}` tag that starts at `after` (past `{%` and its sign) ends, if it is one.
  std::optional<size_t> raw_tag_end(size_t after) const;

  std::string src_;
  std::vector<size_t> line_starts_;
  // The last position pos_at found: tokens come in source order, so the next one's column is
  // counted from here (linear in the source, where counting from the line start was quadratic
  // for a long line of tags).
  mutable size_t last_index_ = 0;
  mutable SourcePos last_pos_{1, 1};
  std::vector<Token> tokens_;
  size_t i_ = 0;
  bool line_starting_ = true;  // the previous delimiter ended with a newline
};

SourcePos Lexer::pos_at(size_t index) const {
  auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), index) - 1;
  const int line_number = static_cast<int>(line - line_starts_.begin()) + 1;
  size_t from = *line;
  int column = 1;
  if (line_number == last_pos_.line && index >= last_index_) from = last_index_, column = last_pos_.column;
  column += static_cast<int>(code_point_count(std::string_view(src_).substr(from, index - from)));
  last_index_ = index;
  last_pos_ = SourcePos{line_number, column};
  return last_pos_;
}

size_t Lexer::skip_space(size_t at) const {
  while (at < src_.size()) {
    size_t length = 1;
    unsigned char b = static_cast<unsigned char>(src_[at]);
    if (b >= 0x80) length = (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
    std::u32string cp = utf8_decode(std::string_view(src_).substr(at, length));
    if (cp.size() != 1 || !is_python_space(cp[0])) break;
    at += length;
  }
  return at;
}

void Lexer::emit_text(std::string text, size_t text_begin, char sign, bool lstrip_applies) {
  if (sign == '-') {
    text = python_strip(text, std::nullopt, false, true);
  } else if (sign != '+' && lstrip_applies) {
    size_t line_begin = text.rfind('\n');
    line_begin = line_begin == std::string::npos ? 0 : line_begin + 1;
    if ((line_begin > 0 || line_starting_) && all_space(std::string_view(text).substr(line_begin)))
      text.resize(line_begin);
  }
  if (!text.empty()) push(TokenKind::kText, std::move(text), text_begin);
}

Expected<std::vector<Token>> Lexer::run() {
  while (i_ < src_.size()) {
    size_t open = i_;
    while (open + 1 < src_.size() &&
           !(src_[open] == '{' &&
             std::string_view("{%#").find(src_[open + 1]) != std::string_view::npos))
      ++open;
    if (open + 1 >= src_.size()) {
      push(TokenKind::kText, src_.substr(i_), i_);
      break;
    }
    char type = src_[open + 1];
    size_t after = open + 2;
    char sign = after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
    if (sign) ++after;
    std::optional<size_t> raw_end = type == '%' ? raw_tag_end(after) : std::nullopt;
    emit_text(src_.substr(i_, open - i_), i_, sign, type != '{');
    if (type == '#') {
      LOCKSTEP_TRY(lex_comment(open, after));
    } else if (raw_end) {
      LOCKSTEP_TRY(lex_raw(open, *raw_end));
    } else {
      LOCKSTEP_TRY(lex_tag(type == '%', open));
    }
  }
  push(TokenKind::kEnd, "", src_.size());
  return std::move(tokens_);
}

Status Lexer::lex_comment(size_t open, size_t after) {
  size_t close = src_.find("#}", after);
  if (close == std::string::npos) return error_at(pos_at(open), "unclosed comment (missing '#}')");
  char end_sign =
      close > after && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
  i_ = close + 2;
  if (end_sign == '-')
    i_ = skip_space(i_);
  else if (end_sign == 0 && i_ < src_.size() && src_[i_] == '\n')
    ++i_;  // trim_blocks
  line_starting_ = i_ > close + 2 && src_[i_ - 1] == '\n';
  return Status();
}

std::optional<size_t> Lexer::raw_tag_end(size_t after) const {
  size_t at = skip_space(after);
  if (!starts_with(at, "raw") || (at + 3 < src_.size() && is_name_char(src_[at + 3])))
    return std::nullopt;
  at = skip_space(at + 3);
  if (starts_with(at, "-%}")) return skip_space(at + 3);
  if (starts_with(at, "%}")) return at + 2;
  return std::nullopt;
}

Status Lexer::lex_raw(size_t open, size_t body) {
  line_starting_ = body > 0 && src_[body - 1] == '\n';
  for (size_t at = src_.find("{%", body); at != std::string::npos; at = src_.find("{%", at + 2)) {
    size_t after = at + 2;
    char sign = after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
    size_t word = skip_space(sign ? after + 1 : after);
    if (!starts_with(word, "endraw") || (word + 6 < src_.size() && is_name_char(src_[word + 6])))
      continue;
    size_t close = skip_space(word + 6);
    size_t end;
    if (starts_with(close, "+%}"))
      end = close + 3;
    else if (starts_with(close, "-%}"))
      end = skip_space(close + 3);
    else if (starts_with(close, "%}"))
      end = close + 2 + (close + 2 < src_.size() && src_[close + 2] == '\n' ? 1 : 0);
    else
      continue;
    emit_text(src_.substr(body, at - body), body, sign, true);
    i_ = end;
    line_starting_ = end > 0 && src_[end - 1] == '\n';
    return Status();
  }
  return error_at(pos_at(open), "unclosed 'raw' block (missing '{% endraw %}')");
}

Status Lexer::lex_tag(bool block, size_t open) {
  push(block ? TokenKind::kBlockBegin : TokenKind::kVariableBegin, block ? "{%" : "{{", open);
  i_ = open + 2;
  if (i_ < src_.size() && (src_[i_] == '-' || src_[i_] == '+')) ++i_;
  std::vector<char> brackets;  // open brackets; the tag can end only when none are open
  while (true) {
    i_ = skip_space(i_);
    if (i_ >= src_.size())
      return error_at(pos_at(open), block ? "unclosed tag '{%' (missing '%}')"
                                          : "unclosed tag '{{' (missing '}}')");
    size_t start = i_;
    if (brackets.empty()) {
      std::string_view end = block ? "%}" : "}}";
      bool strip = src_[i_] == '-' && starts_with(i_ + 1, end);
      bool keep = block && src_[i_] == '+' && starts_with(i_ + 1, end);
      if (strip || keep || starts_with(i_, end)) {
        i_ += end.size() + (strip || keep ? 1 : 0);
        push(block ? TokenKind::kBlockEnd : TokenKind::kVariableEnd, std::string(end), start);
        if (strip)
          i_ = skip_space(i_);
        else if (block && !keep && i_ < src_.size() && src_[i_] == '\n')
          ++i_;  // trim_blocks
        line_starting_ = i_ > 0 && src_[i_ - 1] == '\n' && i_ > start + end.size();
        return Status();
      }
    }
    char c = src_[i_];
    if (is_digit(c)) {
      LOCKSTEP_TRY(lex_number());
    } else if (is_name_start(c)) {
      while (i_ < src_.size() && is_name_char(src_[i_])) ++i_;
      push(TokenKind::kName, src_.substr(start, i_ - start), start);
    } else if (c == '\'' || c == '"') {
      LOCKSTEP_TRY(lex_string());
    } else {
      static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
      std::string op;
      for (std::string_view two : kTwoChar)
        if (starts_with(i_, two)) op = std::string(two);
      if (op.empty() && std::string_view("+-*/%~()[]{},.:|=<>;").find(c) != std::string_view::npos)
        op = std::string(1, c);
      if (op.empty())
        return error_at(pos_at(start), std::string("unexpected character '") + c + "'");
      if (op == "(" || op == "[" || op == "{") brackets.push_back(c);
      if (op == ")" || op == "]" || op == "}") {
        char expected = c == ')' ? '(' : c == ']' ? '[' : '{';
        if (brackets.empty() || brackets.back() != expected)
          return error_at(pos_at(start), "unexpected '" + op + "'");
        brackets.pop_back();
      }
      i_ += op.size();
      push(TokenKind::kOperator, op, start);
    }
  }
}

Status Lexer::lex_number() {
  size_t start = i_;
  auto digits = [&] {
    while (i_ < src_.size() && (is_digit(src_[i_]) || (src_[i_] == '_' && i_ + 1 < src_.size() &&
                                                       is_digit(src_[i_ + 1]))))
      ++i_;
  };
  digits();
  bool is_float = false;
  bool after_dot = start > 0 && src_[start - 1] == '.';  // `a.0.1` is two lookups, not a float
  if (!after_dot && i_ + 1 < src_.size() && src_[i_] == '.' && is_digit(src_[i_ + 1])) {
    ++i_;
    digits();
    is_float = true;
  }
  if (!after_dot && i_ < src_.size() && (src_[i_] == 'e' || src_[i_] == 'E')) {
    size_t exponent = i_ + 1;
    if (exponent < src_.size() && (src_[exponent] == '+' || src_[exponent] == '-')) ++exponent;
    if (exponent < src_.size() && is_digit(src_[exponent])) {
      i_ = exponent;
      digits();
      is_float = true;
    }
  }
  std::string text;
  for (size_t k = start; k < i_; ++k)
    if (src_[k] != '_') text += src_[k];
  Token token{is_float ? TokenKind::kFloat : TokenKind::kInteger, text, 0, 0.0, pos_at(start)};
  if (is_float) {
    token.number = std::strtod(text.c_str(), nullptr);
  } else {
    errno = 0;
    unsigned long long parsed = std::strtoull(text.c_str(), nullptr, 10);
    if (errno != 0 || parsed > static_cast<unsigned long long>(INT64_MAX))
      return error_at(token.pos, "integer literal too large: " + text);
    token.integer = static_cast<int64_t>(parsed);
  }
  tokens_.push_back(std::move(token));
  return Status();
}

Status Lexer::lex_string() {
  size_t start = i_;
  char quote = src_[i_++];
  std::string value;
  auto hex = [&](size_t count) -> std::optional<char32_t> {
    if (i_ + count > src_.size()) return std::nullopt;
    char32_t c = 0;
    for (size_t k = 0; k < count; ++k) {
      char h = src_[i_ + k];
      int digit = hex_digit(h);
      if (digit < 0) return std::nullopt;
      c = c * 16 + static_cast<char32_t>(digit);
    }
    i_ += count;
    return c;
  };
  while (true) {
    if (i_ >= src_.size()) return error_at(pos_at(start), "unterminated string literal");
    char c = src_[i_++];
    if (c == quote) break;
    if (c != '\\') {
      value += c;
      continue;
    }
    if (i_ >= src_.size()) return error_at(pos_at(start), "unterminated string literal");
    char e = src_[i_++];
    switch (e) {  // Python's unicode-escape decoding
      case '\n': break;
      case '\\': value += '\\'; break;
      case '\'': value += '\''; break;
      case '"': value += '"'; break;
      case 'a': value += '\a'; break;
      case 'b': value += '\b'; break;
      case 'f': value += '\f'; break;
      case 'n': value += '\n'; break;
      case 'r': value += '\r'; break;
      case 't': value += '\t'; break;
      case 'v': value += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        std::optional<char32_t> c32 = hex(e == 'x' ? 2 : e == 'u' ? 4 : 8);
        if (!c32 || *c32 > 0x10ffff)
          return error_at(pos_at(i_ - 2), std::string("invalid \\") + e + " escape in string");
        if (*c32 >= 0xd800 && *c32 < 0xdc00 && starts_with(i_, "\\u")) {  // a surrogate pair
          i_ += 2;
          std::optional<char32_t> low = hex(4);
          if (low && *low >= 0xdc00 && *low < 0xe000)
            *c32 = 0x10000 + ((*c32 - 0xd800) << 10) + (*low - 0xdc00);
        }
        utf8_append(value, *c32);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          int octal = e - '0';
          for (int k = 0; k < 2 && i_ < src_.size() && src_[i_] >= '0' && src_[i_] <= '7'; ++k)
            octal = octal * 8 + (src_[i_++] - '0');
          utf8_append(value, static_cast<char32_t>(octal));
        } else {  // an unknown escape keeps its backslash
          value += '\\';
          value += e;
        }
    }
  }
  push(TokenKind::kString, std::move(value), start);
  return Status();
}

}  // namespace

Expected<std::vector<Token>> tokenize(std::string_view source) {
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace lockstep::jinja
