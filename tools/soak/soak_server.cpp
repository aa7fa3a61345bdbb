#include "soak_server.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace lockstep::soak {

namespace {

// The value of the sample line that starts with `name` followed by a space.
Expected<int64_t> sample(const std::string& metrics, const std::string& name) {
  std::istringstream lines(metrics);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with(name + " ")) continue;
    return int64_t(std::stod(line.substr(name.size() + 1)));
  }
  return make_error("GET /metrics has no " + name);
}

}  // namespace

Expected<PoolState> read_pools(const HttpEndpoint& server) {
  auto reply = http_request(server, "GET", "/metrics", "", 30);
  if (!reply.ok()) return reply.error();
  if (reply->status != 200) return make_error("GET /metrics answered " + std::to_string(reply->status));
  PoolState pools;
  for (auto [name, value] : {std::pair{"lockstep_active_streams", &pools.active_streams},
                             {"lockstep_queue_length", &pools.queue_length},
                             {"lockstep_unreserved_kv_pages", &pools.unreserved_kv_pages},
                             {"lockstep_requests_total{outcome=\"failed\"}", &pools.failed_requests}}) {
    auto read = sample(reply->body, name);
    if (!read.ok()) return read.error();
    *value = *read;
  }
  return pools;
}

int64_t resident_kib(int pid) {
  if (pid <= 0) return -1;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with("VmRSS:")) return std::stoll(line.substr(6));
  return -1;
}

std::string mib_text(int64_t kib) {
  if (kib < 0) return "?";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", double(kib) / 1024);
  return text;
}

}  // namespace lockstep::soak
