// Server metrics in the Prometheus text format (GET /metrics). Thread-safe: handlers and the
// lane thread record; any thread renders.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "lanes/lane_host.h"

namespace lockstep {

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the _bucket, _sum and _count lines of metric `name`.
  void render(const std::string& name, const std::string& help, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, then +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  // A request ended: outcome is "ok", "cancelled", "invalid" (4xx), "busy" (503) or "failed".
  void request_done(const std::string& outcome);
  void time_to_first_token(double seconds);
  void gap_between_tokens(double seconds);
  // The text of GET /metrics, with the lane host's counters (kv_page_bytes: ModelInfo's).
  std::string render(const LaneStats& lanes, int64_t kv_page_bytes) const;

 private:
  mutable std::mutex mutex_;
  uint64_t ok_ = 0, cancelled_ = 0, invalid_ = 0, busy_ = 0, failed_ = 0;
  Histogram first_token_;
  Histogram gap_;
};

}  // namespace lockstep
