#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

namespace lockstep {

namespace {

int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(uint16_t(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += size_t(n);
  }
  return true;
}

// Reads more into `into`; false on close, error or timeout.
bool read_some(int fd, std::string& into, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return false;
  char buffer[8192];
  ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
  if (n <= 0) return false;
  into.append(buffer, size_t(n));
  return true;
}

std::string request_text(const std::string& method, const std::string& path, const std::string& body) {
  std::string text = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!body.empty() || method == "POST")
    text += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  return text + "\r\n" + body;
}

}  // namespace

HttpReply http_request(int port, const std::string& method, const std::string& path, const std::string& body,
                       int timeout_seconds) {
  Expected<HttpReply> reply = http_request(HttpEndpoint{"127.0.0.1", port}, method, path, body, timeout_seconds);
  return reply.ok() ? std::move(*reply) : HttpReply{};
}

OpenRequest::OpenRequest(int port, const std::string& method, const std::string& path, const std::string& body) {
  fd_ = connect_to(port);
  if (fd_ >= 0 && !send_all(fd_, request_text(method, path, body))) hang_up();
}

OpenRequest::~OpenRequest() { hang_up(); }

std::string OpenRequest::read_until(const std::string& needle, int timeout_seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  while (fd_ >= 0 && received_.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline)
    if (!read_some(fd_, received_, 200) && received_.find(needle) == std::string::npos) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 0) > 0) break;  // closed
    }
  return received_;
}

void OpenRequest::hang_up() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace lockstep
