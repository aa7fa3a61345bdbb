// Measures this machine's memory read bandwidth the way a decode step reads its weights: every
// thread of a ThreadPool streams its own contiguous share of a buffer far larger than the caches.
// Header-only because CMake turns each bench/*.cpp into its own executable.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "base/thread_pool.h"
#include "timing.h"

namespace lockstep::bench {

// The widest vector loads this CPU has: on this project's 2-core VM, 16-byte loads read a third
// to a half slower than 64-byte ones, which would understate the bandwidth an AVX-512 kernel sees.
#if defined(__x86_64__)
#define LOCKSTEP_WIDEST_VECTORS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define LOCKSTEP_WIDEST_VECTORS
#endif

// The sum of data[0, n). Four independent 64-byte accumulators keep the adds off the critical
// path, so a core is limited by its loads, not by add latency.
LOCKSTEP_WIDEST_VECTORS inline double sum_floats(const float* data, int64_t n) {
  typedef float Lanes __attribute__((vector_size(64)));
  constexpr int kAccumulators = 4;
  constexpr int64_t kLanes = 16;
  constexpr int64_t kStep = kAccumulators * kLanes;
  Lanes acc[kAccumulators] = {};
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
#pragma GCC unroll 4
    for (int j = 0; j < kAccumulators; ++j) {  // unrolled, or the accumulators live on the stack
      Lanes v;
      std::memcpy(&v, data + i + kLanes * j, sizeof(v));
      acc[j] += v;
    }
  }
  double total = 0.0;
  for (int j = 0; j < kAccumulators; ++j)
    for (int lane = 0; lane < kLanes; ++lane) total += double(acc[j][lane]);
  for (; i < n; ++i) total += double(data[i]);
  return total;
}

struct ReadBandwidth {
  double best_gb_per_s = 0.0;  // the fastest pass, in 1e9 bytes per second
  double median_gb_per_s = 0.0;
  double checksum = 0.0;  // the last pass's sum, printed so the reads cannot be elided
};

// Allocates `bytes` of floats, touches them from the pool's threads, then times `passes` full
// parallel reads. Costs about one second for 1 GiB at 10 GB/s.
inline ReadBandwidth measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t(1) << 30, int passes = 5) {
  const int64_t n = int64_t(bytes / sizeof(float));
  constexpr int64_t kGrain = int64_t(1) << 14;  // 64 KiB: whole pages per thread
  auto* data = static_cast<float*>(std::aligned_alloc(64, size_t(n) * sizeof(float)));
  if (!data) throw std::bad_alloc();
  pool.parallel_for(n, kGrain, [&](int64_t begin, int64_t end) { std::fill(data + begin, data + end, 1.0f); });

  ReadBandwidth result;
  std::vector<double> rates;
  for (int pass = 0; pass < passes; ++pass) {
    std::atomic<double> total{0.0};
    Clock::time_point start = Clock::now();
    pool.parallel_for(n, kGrain, [&](int64_t begin, int64_t end) { total += sum_floats(data + begin, end - begin); });
    double seconds = seconds_since(start);
    rates.push_back(double(n) * sizeof(float) / seconds / 1e9);
    result.checksum = total.load();
  }
  std::free(data);
  result.best_gb_per_s = *std::max_element(rates.begin(), rates.end());
  result.median_gb_per_s = median(rates);
  return result;
}

}  // namespace lockstep::bench
