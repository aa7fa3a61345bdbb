#include "http_client.h"

#include <chrono>

namespace lockstep {

HttpReply http_request(int port, const std::string& method, const std::string& path, const std::string& body,
                       int timeout_seconds) {
  Expected<HttpReply> reply = http_request(HttpEndpoint{"127.0.0.1", port}, method, path, body, timeout_seconds);
  return reply.ok() ? std::move(*reply) : HttpReply{};
}

OpenRequest::OpenRequest(int port, const std::string& method, const std::string& path, const std::string& body)
    : connection_(HttpEndpoint{"127.0.0.1", port}, std::chrono::milliseconds(200)) {
  const HttpEndpoint server{"127.0.0.1", port};
  connected_ = connection_.open().ok() && connection_.send(http_request_text(server, method, path, body)).ok();
}

std::string OpenRequest::read_until(const std::string& needle, int timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  while (connected_ && received_.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    received_ += connection_.read_until(needle);
    if (connection_.closed_by_server()) break;
  }
  return received_;
}

void OpenRequest::hang_up() {
  connection_.hang_up();
  connected_ = false;
}

}  // namespace lockstep
