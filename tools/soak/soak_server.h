// What the soak test reads of the server itself: its pools (GET /metrics) and its resident
// memory (/proc/PID/status).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "http/http_client.h"

namespace lockstep::soak {

struct PoolState {
  int64_t active_streams = 0;
  int64_t queue_length = 0;
  int64_t unreserved_kv_pages = 0;
  int64_t failed_requests = 0;  // lockstep_requests_total{outcome="failed"}: the server's own 500s
};

[[nodiscard]] Expected<PoolState> read_pools(const HttpEndpoint& server);

// VmRSS in KiB; -1 without a pid or when it cannot be read.
int64_t resident_kib(int pid);

// "123.4 MiB", or "?" for -1.
std::string mib_text(int64_t kib);

}  // namespace lockstep::soak
