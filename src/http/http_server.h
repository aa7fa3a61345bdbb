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
#include <memory>
#include <string>

#include "base/status.h"
#include "http/http_handler.h"

namespace lockstep {

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
