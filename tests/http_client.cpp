#include "http_client.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

namespace lockstep {

HttpReply http_request(int port, const std::string& method, const std::string& path, const std::string& body,
                       int timeout_seconds) {
  Expected<HttpReply> reply = http_request(HttpEndpoint{"127.0.0.1", port, {}}, method, path, body, timeout_seconds);
  return reply.ok() ? std::move(*reply) : HttpReply{};
}

std::vector<int32_t> reply_ids(const HttpReply& reply, bool stream) {
  std::vector<int32_t> ids;
  if (!stream) {
    nlohmann::json body = nlohmann::json::parse(reply.body, nullptr, false);
    if (body.is_discarded() || !body.contains("choices")) return ids;
    return body["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  }
  for (const std::string& payload : sse_payloads(reply.body)) {
    if (payload == "[DONE]") break;
    nlohmann::json chunk = nlohmann::json::parse(payload);
    for (const auto& choice : chunk["choices"])
      if (choice.contains("token_ids")) {
        auto more = choice["token_ids"].get<std::vector<int32_t>>();
        ids.insert(ids.end(), more.begin(), more.end());
      }
  }
  return ids;
}

double metric_value(const std::string& metrics, const std::string& series) {
  const std::string line = "\n" + series + " ";
  const size_t at = metrics.find(line);
  return at == std::string::npos ? std::nan("") : std::stod(metrics.substr(at + line.size()));
}

OpenRequest::OpenRequest(int port, const std::string& method, const std::string& path, const std::string& body)
    : connection_(HttpEndpoint{"127.0.0.1", port, {}}, std::chrono::milliseconds(200)) {
  const HttpEndpoint server{"127.0.0.1", port, {}};
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
