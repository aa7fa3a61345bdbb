// Wall-clock timing for the benchmarks: a stopwatch and the median of repeated runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace lockstep::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point begin, Clock::time_point end) {
  return std::chrono::duration<double>(end - begin).count();
}

inline double seconds_since(Clock::time_point begin) { return seconds_between(begin, Clock::now()); }

// The median of `samples` (non-empty); the upper middle one when the count is even.
inline double median(std::vector<double> samples) {
  auto middle = samples.begin() + samples.size() / 2;
  std::nth_element(samples.begin(), middle, samples.end());
  return *middle;
}

}  // namespace lockstep::bench
