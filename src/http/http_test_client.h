// For tests: a client that sends any bytes to 127.0.0.1 (the library's ClientConnection), every
// read and write bounded by a timeout, and a server running serve() on its own thread.
// Header-only, so that it is not built into the library.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "http/http_client.h"
#include "http/http_server.h"

namespace lockstep::http_test {

// Waits up to five seconds for `flag`; true when it was set.
template <typename Flag>
bool wait_for(const Flag& flag) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

inline int64_t ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

using ClientResponse = HttpReply;

// A connection to 127.0.0.1:port through the library's client (http_client.h), with the
// tests' spelling: failures as false or nothing.
class TestClient {
 public:
  explicit TestClient(int port, int timeout_ms = 5000)
      : connection_(HttpEndpoint{"127.0.0.1", port, {}}, std::chrono::milliseconds(timeout_ms)),
        connected_(connection_.open().ok()) {}

  bool connected() const { return connected_; }
  bool send(std::string_view bytes) { return connection_.send(bytes).ok(); }
  // One response: a 1xx head alone, or a head and its body (by Content-Length, chunked, or up
  // to the close). Nothing on a timeout or a connection closed too early.
  std::optional<ClientResponse> read_response() {
    Expected<HttpReply> reply = connection_.read_reply();
    if (!reply.ok()) return std::nullopt;
    return std::move(*reply);
  }
  // Everything the server sends until it closes the connection (or the timeout).
  std::string read_until_close() { return connection_.read_until_close(); }
  // True when the server closes the connection (within the timeout) with nothing more sent.
  bool closed_by_server() { return connection_.closed_by_server(); }
  void close() { connection_.hang_up(); }
  void half_close() { connection_.finish_sending(); }

 private:
  ClientConnection connection_;
  bool connected_;
};

// An HttpServer listening on 127.0.0.1, an ephemeral port, serving on its own thread.
class RunningServer {
 public:
  RunningServer(HttpSettings settings, HttpHandler handler)
      : server_(with_test_address(std::move(settings)), std::move(handler)) {
    listened_ = server_.listen();
    if (listened_.ok()) thread_ = std::thread([this] { server_.serve(); });
  }
  ~RunningServer() { stop(); }

  const Status& listened() const { return listened_; }
  int port() const { return server_.port(); }
  HttpServer& server() { return server_; }
  // Calls stop() and waits for serve() to return.
  void stop() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  static HttpSettings with_test_address(HttpSettings settings) {
    settings.host = "127.0.0.1";
    settings.port = 0;
    return settings;
  }

  HttpServer server_;
  Status listened_;
  std::thread thread_;
};

}  // namespace lockstep::http_test
