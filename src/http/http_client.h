// A small blocking HTTP/1.1 client, for `lockstep bench` and the server tests: one request per
// connection ("Connection: close"), Content-Length request bodies, replies read by
// Content-Length, chunked or up to the close, and server-sent events handed over one `data:`
// payload at a time as they arrive. IPv4 only. Every function is safe to call from many
// threads at once: each call owns its own socket.
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
};

// "http://HOST:PORT", a trailing "/" allowed; HOST is a dotted IPv4 address or "localhost".
[[nodiscard]] Expected<HttpEndpoint> parse_http_url(const std::string& url);

struct HttpReply {
  int status = 0;                              // 0: no reply (the test helpers' "failed")
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked; empty when events were streamed
  std::string header(const std::string& name) const;
};

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
