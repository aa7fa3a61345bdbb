// A small HTTP/1.1 server on POSIX sockets: what lockstep serve needs and nothing more.
//
// Why not cpp-httplib: Debian 12's 0.11 cannot tell a handler that its client went away
// while a non-streaming request waits for its reply, and lockstep must cancel that stream at
// once to free its pages and state slot. Here a handler can ask (HttpResponder::client_gone).
//
// Each connection runs on its own thread (at most max_connections; past that a new connection
// gets 503 and is closed). Keep-alive is supported; request bodies need Content-Length.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/status.h"

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
  // True when the client closed its side of the connection (checked without blocking). Bytes of
  // a pipelined next request do not count as gone.
  virtual bool client_gone() = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponder&)>;

struct HttpSettings {
  std::string host = "127.0.0.1";
  int port = 8080;                        // 0: any free port (see HttpServer::port)
  int max_connections = 256;
  size_t max_body_bytes = 8 << 20;        // larger bodies get 413
  size_t max_header_bytes = 64 << 10;     // larger headers get 431
  int idle_timeout_seconds = 60;          // a keep-alive connection idle this long is closed;
                                          // also the limit on a stalled read or write; <= 0: none
};

class HttpServer {
 public:
  HttpServer(HttpSettings settings, HttpHandler handler);
  // Destroy only when serve() is not running (it has returned, or was never called).
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens (SO_REUSEADDR), once; an error names the address (in use, bad host).
  [[nodiscard]] Status listen();
  // The bound port (after listen()).
  int port() const { return port_; }
  // Accepts connections until stop(); returns after every connection thread has ended, and
  // closes the listening socket. Returns at once without a successful listen() or after stop().
  // The handler runs on the connection threads, several at once.
  void serve();
  // Stops accepting, wakes serve(), and closes idle keep-alive connections; connections with a
  // request in flight finish it (answered with "Connection: close"). Safe from any thread and
  // from a signal-watching thread (it stores a flag and writes an eventfd: async-signal-safe),
  // more than once, and before serve().
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace lockstep
