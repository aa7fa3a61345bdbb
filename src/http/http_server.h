// A small HTTP/1.1 server on POSIX sockets: what lockstep serve needs and nothing more.
//
// Why not cpp-httplib: Debian 12's 0.11 cannot tell a handler that its client went away
// while a non-streaming request waits for its reply, and lockstep must cancel that stream at
// once to free its pages and state slot. Here a handler can ask (HttpResponder::client_gone).
//
// One event loop (http_loop.h) reads every connection's requests without blocking; each
// complete request runs its handler on a thread of its own. Keep-alive and pipelining are
// supported; request bodies need Content-Length. Limits: HttpSettings (http_handler.h).
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
  // Serves until stop(); returns once every connection has closed, and closes the listening
  // socket. Returns at once without a successful listen(). The handler runs on request
  // threads, several at once.
  void serve();
  // Stops accepting (connections already waiting to be accepted get 503), closes idle
  // connections, answers requests still arriving with 503, and lets requests in flight finish
  // ("Connection: close") for HttpSettings::stop_grace_ms, after which their connections are
  // shut. Safe from any thread and from a signal handler (it stores a flag and writes an
  // eventfd: async-signal-safe), more than once, and before serve().
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace lockstep
