// The one horizontal sum of the AVX2 kernels (matmul_avx2.cpp, matmul_quant_avx2.cpp): a result
// has the same bits from either only if both end its 8 lanes' sums the same way. Include only
// from files compiled for AVX2.
#pragma once

#include <immintrin.h>

namespace lockstep::cpu {

inline float sum_lanes(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

}  // namespace lockstep::cpu
