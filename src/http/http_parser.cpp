#include "http/http_parser.h"

#include <cctype>
#include <limits>

#include "base/hex.h"

namespace lockstep {
namespace {

// tchar of RFC 9110 section 5.6.2: the characters of methods and header names.
bool is_token_char(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool is_token(std::string_view text) {
  if (text.empty()) return false;
  for (unsigned char c : text)
    if (!is_token_char(c)) return false;
  return true;
}

// Field values: visible characters, spaces, tabs and obs-text; no other control characters.
bool is_field_value(std::string_view text) {
  for (unsigned char c : text)
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  return true;
}

// Request targets: visible ASCII and obs-text, no spaces or control characters.
bool is_target(std::string_view text) {
  if (text.empty()) return false;
  for (unsigned char c : text)
    if (c <= 0x20 || c == 0x7f) return false;
  return true;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// The line starting at `pos`, without its LF or CRLF; `next` is where the following line starts.
// False when no LF has arrived yet.
bool next_line(std::string_view buffer, size_t pos, std::string_view& line, size_t& next) {
  size_t lf = buffer.find('\n', pos);
  if (lf == std::string_view::npos) return false;
  line = buffer.substr(pos, lf - pos);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  next = lf + 1;
  return true;
}

// "METHOD SP request-target SP HTTP/1.x", with single spaces.
bool parse_request_line(std::string_view line, RequestHead& head) {
  size_t first_space = line.find(' ');
  if (first_space == std::string_view::npos) return false;
  size_t second_space = line.find(' ', first_space + 1);
  if (second_space == std::string_view::npos) return false;
  std::string_view method = line.substr(0, first_space);
  std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
  std::string_view version = line.substr(second_space + 1);
  if (!is_token(method) || !is_target(target)) return false;

  constexpr std::string_view kPrefix = "HTTP/1.";
  if (version.size() != kPrefix.size() + 1 || version.substr(0, kPrefix.size()) != kPrefix)
    return false;
  char minor = version.back();
  if (minor < '0' || minor > '9') return false;
  head.minor_version = minor == '0' ? 0 : 1;  // a later 1.x is answered as 1.1

  // Absolute form (a client talking to a proxy): keep what follows the authority.
  bool absolute = false;
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() > scheme.size() &&
        equals_ignoring_case(target.substr(0, scheme.size()), scheme)) {
      size_t path_start = target.find_first_of("/?", scheme.size());
      target = path_start == std::string_view::npos ? std::string_view("/") : target.substr(path_start);
      absolute = true;
      break;
    }
  }
  bool origin_form = target.front() == '/' || (absolute && target.front() == '?');
  if (!origin_form && !(target == "*" && method == "OPTIONS")) return false;

  size_t question = target.find('?');
  std::string_view path = target.substr(0, question);
  head.request.method = std::string(method);
  head.request.path = path.empty() ? "/" : std::string(path);
  head.request.query = question == std::string_view::npos ? "" : std::string(target.substr(question + 1));
  return true;
}

// "name: value". No space before the colon and no obsolete line folding (RFC 9112 5.1-5.2).
bool parse_header_line(std::string_view line, RequestHead& head) {
  if (line.front() == ' ' || line.front() == '\t') return false;
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return false;
  std::string_view name = line.substr(0, colon);
  std::string_view value = trim(line.substr(colon + 1));
  if (!is_token(name) || !is_field_value(value)) return false;

  auto [it, inserted] = head.request.headers.emplace(lower(name), std::string(value));
  if (!inserted) {
    it->second += ", ";
    it->second += value;
  }
  return true;
}

// A Content-Length value; a list of equal values ("5, 5", from repeated headers) is accepted.
bool parse_content_length(std::string_view value, size_t& length) {
  bool seen = false;
  while (true) {
    size_t comma = value.find(',');
    std::string_view item = trim(value.substr(0, comma));
    if (item.empty()) return false;
    size_t parsed = 0;
    for (char c : item) {
      if (c < '0' || c > '9') return false;
      size_t digit = size_t(c - '0');
      if (parsed > (std::numeric_limits<size_t>::max() - digit) / 10) return false;
      parsed = parsed * 10 + digit;
    }
    if (seen && parsed != length) return false;
    length = parsed;
    seen = true;
    if (comma == std::string_view::npos) return true;
    value.remove_prefix(comma + 1);
  }
}

}  // namespace

HeadParse parse_request_head(std::string_view buffer, size_t max_header_bytes, RequestHead& head) {
  // Find the blank line that ends the head before parsing, so that a partial head costs a scan.
  size_t start = 0;
  std::string_view line;
  size_t next = 0;
  while (next_line(buffer, start, line, next) && line.empty()) start = next;
  size_t end = 0;  // just past the blank line
  for (size_t pos = start;;) {
    if (!next_line(buffer, pos, line, next))
      return buffer.size() > max_header_bytes ? HeadParse::kTooLarge : HeadParse::kIncomplete;
    if (next > max_header_bytes) return HeadParse::kTooLarge;
    if (line.empty() && pos > start) {
      end = next;
      break;
    }
    pos = next;
  }

  RequestHead parsed;
  if (!next_line(buffer, start, line, next) || !parse_request_line(line, parsed))
    return HeadParse::kMalformed;
  for (size_t pos = next; next_line(buffer, pos, line, next) && !line.empty(); pos = next)
    if (!parse_header_line(line, parsed)) return HeadParse::kMalformed;
  parsed.head_bytes = end;
  head = std::move(parsed);
  return HeadParse::kComplete;
}

BodyFraming body_framing(const RequestHead& head, size_t max_body_bytes) {
  const auto& headers = head.request.headers;
  BodyFraming framing;
  if (headers.count("transfer-encoding")) {
    framing.error_status = 501;
    framing.error_message = "Transfer-Encoding is not supported in requests; send Content-Length";
    return framing;
  }
  auto length = headers.find("content-length");
  if (length == headers.end()) {
    const std::string& method = head.request.method;
    if (method == "POST" || method == "PUT" || method == "PATCH") {
      framing.error_status = 411;
      framing.error_message = method + " needs a Content-Length header";
    }
    return framing;
  }
  if (!parse_content_length(length->second, framing.content_length)) {
    framing.error_status = 400;
    framing.error_message = "invalid Content-Length: " + length->second;
    return framing;
  }
  if (framing.content_length > max_body_bytes) {
    framing.error_status = 413;
    framing.error_message = "request body of " + std::to_string(framing.content_length) +
                            " bytes is over the limit of " + std::to_string(max_body_bytes);
  }
  return framing;
}

bool header_has_token(std::string_view value, std::string_view token) {
  while (true) {
    size_t comma = value.find(',');
    if (equals_ignoring_case(trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) return false;
    value.remove_prefix(comma + 1);
  }
}

bool wants_keep_alive(const RequestHead& head) {
  auto connection = head.request.headers.find("connection");
  if (head.minor_version == 0)
    return connection != head.request.headers.end() && header_has_token(connection->second, "keep-alive");
  return connection == head.request.headers.end() || !header_has_token(connection->second, "close");
}

bool expects_continue(const RequestHead& head) {
  auto expect = head.request.headers.find("expect");
  return head.minor_version >= 1 && expect != head.request.headers.end() &&
         equals_ignoring_case(trim(expect->second), "100-continue");
}

std::optional<std::string> percent_decoded(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hex_digit(text[i + 1]), low = hex_digit(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += char(high * 16 + low);
    i += 2;
  }
  return out;
}

}  // namespace lockstep
