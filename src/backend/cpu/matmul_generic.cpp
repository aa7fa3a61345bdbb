// Portable matmul: 8 lane sums per element in plain C++, for CPUs without AVX2.
#include <cstring>

#include "backend/cpu/matmul.h"
#include "tensor/dtype.h"

namespace lockstep::cpu {
namespace {

constexpr int kLanes = 8;

template <bool kBf16>
inline float weight_at(const void* w, int64_t i) {
  if constexpr (kBf16) return bf16_to_f32(static_cast<const uint16_t*>(w)[i]);
  return static_cast<const float*>(w)[i];
}

template <bool kBf16>
float dot(const float* x, const void* w, int64_t w_offset, int64_t k) {
  float lanes[kLanes] = {};
  int64_t kk = 0;
  for (; kk + kLanes <= k; kk += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[kk + l] * weight_at<kBf16>(w, w_offset + kk + l);
  for (int l = 0; kk + l < k; ++l) lanes[l] += x[kk + l] * weight_at<kBf16>(w, w_offset + kk + l);
  float s4[4], s2[2];
  for (int l = 0; l < 4; ++l) s4[l] = lanes[l] + lanes[l + 4];
  for (int l = 0; l < 2; ++l) s2[l] = s4[l] + s4[l + 2];
  return s2[0] + s2[1];
}

template <bool kBf16>
void matmul(const MatmulArgs& a, int64_t col_begin, int64_t col_end) {
  for (int64_t c = col_begin; c < col_end; ++c)
    for (int64_t r = 0; r < a.n; ++r) a.out[r * a.m + c] = dot<kBf16>(a.x + r * a.k, a.w, c * a.k, a.k);
}

}  // namespace

MatmulKernels matmul_kernels_generic() { return {"generic", matmul<false>, matmul<true>}; }

}  // namespace lockstep::cpu
