// For tests: a raw HTTP/1.1 client on one blocking socket to 127.0.0.1, every read and write
// bounded by a timeout, and a server running serve() on its own thread. Header-only, so that
// it is not built into the library.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "http/http_server.h"

namespace lockstep::http_test {

struct ClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

class TestClient {
 public:
  explicit TestClient(int port, int timeout_ms = 5000) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval timeout = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_port = htons(uint16_t(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~TestClient() { close(); }
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  bool connected() const { return connected_; }

  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(size_t(n));
    }
    return true;
  }

  // Reads one response: a 1xx head alone, or a head and its body (by Content-Length,
  // chunked, or up to the close). Nothing on a timeout or a connection closed too early.
  std::optional<ClientResponse> read_response() {
    size_t head_end;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos)
      if (!fill()) return std::nullopt;
    ClientResponse response;
    std::string_view head(buffer_.data(), head_end);
    size_t line_end = head.find("\r\n");
    std::string_view status_line = head.substr(0, line_end);
    if (status_line.substr(0, 9) != "HTTP/1.1 ") return std::nullopt;
    response.status = std::atoi(std::string(status_line.substr(9, 3)).c_str());
    while (line_end != std::string_view::npos) {
      size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      std::string_view line = head.substr(start, line_end == std::string_view::npos ? std::string_view::npos : line_end - start);
      size_t colon = line.find(':');
      std::string name(line.substr(0, colon));
      for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      response.headers[name] = std::string(value);
    }
    buffer_.erase(0, head_end + 4);
    if (response.status < 200) return response;
    if (response.header("transfer-encoding") == "chunked") {
      if (!read_chunked(response.body)) return std::nullopt;
    } else if (response.headers.count("content-length")) {
      size_t length = std::stoul(response.header("content-length"));
      if (!take(length, response.body)) return std::nullopt;
    } else {
      response.body = read_until_close();
    }
    return response;
  }

  // Everything the server sends until it closes the connection (or the timeout).
  std::string read_until_close() {
    while (fill()) {
    }
    std::string all = std::move(buffer_);
    buffer_.clear();
    return all;
  }

  // True when the server closes the connection (within the timeout) with nothing more sent.
  bool closed_by_server() { return buffer_.empty() && !fill() && buffer_.empty() && eof_; }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  // Appends what arrives; false at end of stream, on an error or a timeout.
  bool fill() {
    char scratch[16 << 10];
    ssize_t n = recv(fd_, scratch, sizeof(scratch), 0);
    if (n <= 0) {
      eof_ = n == 0;
      return false;
    }
    buffer_.append(scratch, size_t(n));
    return true;
  }

  bool take(size_t length, std::string& out) {
    while (buffer_.size() < length)
      if (!fill()) return false;
    out.append(buffer_, 0, length);
    buffer_.erase(0, length);
    return true;
  }

  bool read_chunked(std::string& body) {
    while (true) {
      size_t line_end;
      while ((line_end = buffer_.find("\r\n")) == std::string::npos)
        if (!fill()) return false;
      size_t size = std::stoul(buffer_.substr(0, line_end), nullptr, 16);
      buffer_.erase(0, line_end + 2);
      std::string crlf;
      if (size == 0) return take(2, crlf) && crlf == "\r\n";  // no trailers from this server
      if (!take(size, body) || !take(2, crlf) || crlf != "\r\n") return false;
    }
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buffer_;
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
