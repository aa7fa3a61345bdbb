// What an HTTP handler sees: the request, the responder it answers through, and the server's
// settings. Shared by the server (http_server.h) and its connections (http_connection.h).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>

namespace lockstep {

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string path;                            // without the query string
  std::string query;                           // after '?', undecoded
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

// How a handler answers: once with send(), or as a stream (start_stream, write_chunk...,
// end_stream) sent with chunked transfer encoding. Not thread-safe: the handler's thread only.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  virtual void send(int status, const std::string& content_type, const std::string& body,
                    const std::map<std::string, std::string>& headers = {}) = 0;
  virtual void start_stream(int status, const std::string& content_type,
                            const std::map<std::string, std::string>& headers = {}) = 0;
  // False when the client is gone (the stream should stop).
  [[nodiscard]] virtual bool write_chunk(const std::string& data) = 0;
  virtual void end_stream() = 0;
  // True when the client has gone away (checked without blocking). A client that only shut its
  // sending side (a half-close) is still there: it gets its reply. Bytes of a pipelined next
  // request do not count as gone.
  virtual bool client_gone() = 0;
  // Bytes that a stream may carry without changing its meaning (an SSE comment): the responder
  // writes them at most once, to learn whether a client that shut its sending side still reads.
  // Without them, such a client is found gone by the stream's next write.
  virtual void set_probe_chunk(std::string chunk) { (void)chunk; }
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponder&)>;

struct HttpSettings {
  std::string host = "127.0.0.1";
  int port = 8080;                        // 0: any free port (see HttpServer::port)
  // Open connections. At the limit a new connection takes the place of the one that has waited
  // longest for its request (idle, or still sending it); when every connection has a request in
  // flight, it gets 503.
  int max_connections = 1024;
  size_t max_body_bytes = 8 << 20;        // larger bodies get 413
  size_t max_header_bytes = 64 << 10;     // larger headers get 431
  int request_timeout_seconds = 30;       // the whole request, head and body, from its first
                                          // byte; past it, 408. <= 0: none
  int idle_timeout_seconds = 60;          // a keep-alive connection idle this long is closed;
                                          // also the limit on a stalled write; <= 0: none
  int stop_grace_ms = 3000;               // after stop(), how long requests in flight may take
                                          // before their connections are shut
  // Headers on every response the HTTP layer writes itself (413, 431, 408, a malformed
  // request's 400, a 500 for a handler that threw): the API's CORS origin, so that a browser
  // shows the error rather than a CORS failure.
  std::map<std::string, std::string> error_headers;
};

}  // namespace lockstep
