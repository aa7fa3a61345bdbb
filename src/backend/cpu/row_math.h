// Row reductions with a fixed order (8 lane sums, then a fixed tree), shared by the CPU ops
// so that a row's result depends on that row alone.
#pragma once

#include <cstdint>

namespace lockstep::cpu {

inline float tree_sum8(const float* lanes) {
  float a = (lanes[0] + lanes[4]) + (lanes[2] + lanes[6]);
  float b = (lanes[1] + lanes[5]) + (lanes[3] + lanes[7]);
  return a + b;
}

inline float dot_fixed(const float* a, const float* b, int64_t n) {
  float lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lanes[l] += a[i + l] * b[i + l];
  for (int l = 0; i + l < n; ++l) lanes[l] += a[i + l] * b[i + l];
  return tree_sum8(lanes);
}

inline float sum_squares_fixed(const float* a, int64_t n) { return dot_fixed(a, a, n); }

}  // namespace lockstep::cpu
