// Reads an HTTP/1.x request head (request line and header fields) from the bytes received so
// far, and the rules that follow from it: how the body is framed, whether the connection stays
// open, whether the client waits for "100 Continue". No sockets here, so it is tested alone.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "http/http_handler.h"

namespace lockstep {

enum class HeadParse {
  kIncomplete,  // no blank line yet: read more bytes and parse again
  kComplete,    // the head is parsed; RequestHead::head_bytes says where the body starts
  kTooLarge,    // the head is longer than the limit (answer 431)
  kMalformed,   // not an HTTP/1.x request head (answer 400)
};

struct RequestHead {
  HttpRequest request;    // method, path, query and headers; the body is left empty
  int minor_version = 1;  // HTTP/1.<minor_version>: 0 or 1
  size_t head_bytes = 0;  // bytes of the buffer the head takes, its blank line included
};

// Parses the head at the start of `buffer`, which may hold more (a body, pipelined requests).
// Empty lines before the request line are skipped (RFC 9112 section 2.2) and lines may end in
// LF alone. Header names are lower-cased; a repeated header's values are joined with ", ".
// Request targets in absolute form ("http://host/path") keep only their path and query.
// `head` is written only when the result is kComplete. Pure: the same bytes, the same answer.
HeadParse parse_request_head(std::string_view buffer, size_t max_header_bytes, RequestHead& head);

// How a request's body is delimited, or why the request is refused before reading it.
struct BodyFraming {
  int error_status = 0;        // 0, or 400 (bad Content-Length), 411, 413 or 501
  std::string error_message;   // for the client, when error_status != 0
  size_t content_length = 0;   // bytes of body that follow the head
};

// Only Content-Length framing is supported: Transfer-Encoding gets 501, and POST, PUT and PATCH
// without Content-Length get 411. Other methods without it have no body.
BodyFraming body_framing(const RequestHead& head, size_t max_body_bytes);

// HTTP/1.1 keeps the connection unless "Connection: close"; HTTP/1.0 closes it unless
// "Connection: keep-alive".
bool wants_keep_alive(const RequestHead& head);

// True for "Expect: 100-continue" from an HTTP/1.1 client.
bool expects_continue(const RequestHead& head);

// True when the comma-separated header value lists `token` (compared case-insensitively).
bool header_has_token(std::string_view value, std::string_view token);

// A path segment with its %XX escapes decoded ("org%2Fmodel" -> "org/model"); nullopt for a '%'
// not followed by two hex digits. '+' stays '+' (it means a space only in query strings).
std::optional<std::string> percent_decoded(std::string_view text);

}  // namespace lockstep
