// The bytes the server writes: reason phrases, response heads, chunk framing, and the JSON
// body of the server's own errors (OpenAI's shape, so API clients show the message).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace lockstep {

// "OK", "Not Found", ...; an empty string for a status without a phrase here (still valid HTTP).
std::string_view reason_phrase(int status);

// {"error":{"message":...,"type":...,"code":null}}.
std::string json_error_body(std::string_view message, std::string_view type);

// "server_error" for 500, "server_busy" for 503, "invalid_request_error" for the rest (4xx,
// and 501: the request used something not supported).
std::string_view error_type_for(int status);

// How the response body is delimited.
enum class BodyMode {
  kLength,      // Content-Length
  kChunked,     // Transfer-Encoding: chunked
  kUntilClose,  // no length: the body ends when the connection closes (HTTP/1.0 streams)
};

struct ResponseHead {
  int status = 200;
  std::string_view content_type;  // no Content-Type header when empty
  BodyMode mode = BodyMode::kLength;
  size_t content_length = 0;      // with BodyMode::kLength
  bool keep_alive = true;         // "Connection: keep-alive" or "Connection: close"
};

// The status line and headers, through the blank line. `extra` headers follow the server's;
// those the server owns (Content-Type, Content-Length, Transfer-Encoding, Connection) and any
// with CR, LF or NUL in them are left out, so a handler cannot break the framing.
std::string format_response_head(const ResponseHead& head,
                                 const std::map<std::string, std::string>& extra);

// One chunk of a chunked body: hex size, CRLF, data, CRLF. `data` must not be empty (an empty
// chunk ends the body; see kLastChunk).
std::string format_chunk(std::string_view data);

inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
inline constexpr std::string_view kContinueResponse = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace lockstep
