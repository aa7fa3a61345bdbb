// lockstep's one HTTP/1.1 client, for `lockstep bench`, `lockstep demo` and the tests: blocking,
// IPv4 only. http_request and http_stream send one request per connection ("Connection: close",
// Content-Length bodies) and read the reply by Content-Length, chunked or up to the close;
// http_stream hands server-sent events over one `data:` payload at a time as they arrive.
// ClientConnection, under both, sends any bytes and reads replies one at a time, for tests that
// pipeline, send partial or malformed requests, or hang up mid-reply. Every function is safe to
// call from many threads at once: each call or connection owns its own socket.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lockstep {

struct HttpEndpoint {
  std::string host;  // a dotted IPv4 address or "localhost"
  int port = 0;
  std::string api_key;  // sent as "Authorization: Bearer KEY" on every request when not empty
};

// "http://HOST:PORT", a trailing "/" allowed; HOST is a dotted IPv4 address or "localhost".
[[nodiscard]] Expected<HttpEndpoint> parse_http_url(const std::string& url);

struct HttpReply {
  int status = 0;                              // 0: no reply (the test helpers' "failed")
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked; empty when events were streamed
  std::string header(const std::string& name) const;
};

// One client socket and the bytes read from it but not yet consumed. Not thread-safe.
class ClientConnection {
 public:
  // `timeout` bounds the connect and each wait for more bytes (not a whole reply).
  ClientConnection(HttpEndpoint server, std::chrono::milliseconds timeout);
  ~ClientConnection();
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  // Connects; an error names the server and why.
  [[nodiscard]] Status open();
  [[nodiscard]] Status send(std::string_view bytes);
  // Reads one reply: a 1xx head alone, else the head and the body by its framing (a streamed
  // body comes whole, once the server ends it). An error on a timeout, a malformed reply, or a
  // close mid-reply.
  [[nodiscard]] Expected<HttpReply> read_reply();
  // Reads until `needle` is among the bytes not yet consumed, the server closes, or the timeout;
  // returns those bytes (all of them, consumed).
  std::string read_until(std::string_view needle);
  // Every byte until the server closes (or the timeout), consumed.
  std::string read_until_close();
  // True when the server closes the connection (within the timeout) having sent nothing more.
  bool closed_by_server();
  // Closes the socket (the destructor does too).
  void hang_up();
  // Shuts the sending side (a half-close): the server sees the end of the request bytes and
  // may still answer.
  void finish_sending();

  // For readers of a reply as it arrives (http_stream): the head, then the body in pieces.
  using BodySink = std::function<bool(std::string_view bytes, std::chrono::steady_clock::time_point arrived)>;
  [[nodiscard]] Status read_head(HttpReply& reply);
  [[nodiscard]] Status read_body(const HttpReply& reply, const BodySink& sink);

 private:
  // Appends what arrives next: true for bytes, false when the server closed; an error on a
  // timeout or a failed read.
  Expected<bool> fill();
  // fill(), with a close counted as an error: the reply is cut short.
  Status fill_or_fail();

  HttpEndpoint server_;
  std::string where_;
  int timeout_ms_;
  int fd_ = -1;
  std::string buffer_;
  std::chrono::steady_clock::time_point arrived_;
};

// The text of a request as http_request sends it.
std::string http_request_text(const HttpEndpoint& server, const std::string& method, const std::string& path,
                              const std::string& body);

// Sends one request and reads the whole reply. `timeout_seconds` bounds the connect and each
// wait for more bytes (not the whole reply). An error when the server cannot be reached, goes
// quiet for longer than the timeout, or closes the connection mid-reply.
[[nodiscard]] Expected<HttpReply> http_request(const HttpEndpoint& server, const std::string& method,
                                               const std::string& path, const std::string& body = "",
                                               int timeout_seconds = 60);

// Called once per server-sent event with its data (the `data:` lines joined by "\n") and the
// time the bytes that completed it were received. Return false to hang up.
using SseHandler = std::function<bool(std::string_view data, std::chrono::steady_clock::time_point arrived)>;

// Like http_request, but a 2xx reply of Content-Type text/event-stream is read incrementally
// and its events go to `on_event` (the reply's body stays empty); any other reply is read whole
// into the body. Returns normally when the server ends the stream or the handler hangs up.
[[nodiscard]] Expected<HttpReply> http_stream(const HttpEndpoint& server, const std::string& method,
                                              const std::string& path, const std::string& body,
                                              const SseHandler& on_event, int timeout_seconds = 60);

// The data payloads of a whole server-sent event body, in order.
std::vector<std::string> sse_payloads(const std::string& body);

}  // namespace lockstep
