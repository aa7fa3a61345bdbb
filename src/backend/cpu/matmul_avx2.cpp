// AVX2 matmul: 8-lane accumulators, tiles of up to 4 rows by 2 columns.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/avx2_lanes.h"
#include "backend/cpu/matmul.h"

namespace lockstep::cpu {
namespace {

template <bool kBf16>
inline __m256 load_w(const void* w, int64_t offset) {
  if constexpr (kBf16) {
    __m128i words = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + offset));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(words), 16));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(w) + offset);
  }
}

// The last k % 8 values, zero-padded to a full vector.
template <bool kBf16>
inline __m256 load_w_tail(const void* w, int64_t offset, int64_t count) {
  float values[8] = {};
  for (int64_t i = 0; i < count; ++i) {
    if constexpr (kBf16) {
      uint32_t word = uint32_t(static_cast<const uint16_t*>(w)[offset + i]) << 16;
      std::memcpy(&values[i], &word, 4);
    } else {
      values[i] = static_cast<const float*>(w)[offset + i];
    }
  }
  return _mm256_loadu_ps(values);
}

inline __m256 load_x_tail(const float* x, int64_t count) {
  float values[8] = {};
  for (int64_t i = 0; i < count; ++i) values[i] = x[i];
  return _mm256_loadu_ps(values);
}

template <int R, int C, bool kBf16>
void tile(const MatmulArgs& a, int64_t row0, int64_t col0, int64_t spacing) {
  const int64_t k = a.k;
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  const float* x = a.x + row0 * k;
  int64_t kk = 0;
  for (; kk + 8 <= k; kk += 8) {
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = load_w<kBf16>(a.w, (col0 + c * spacing) * k + kk);
    for (int r = 0; r < R; ++r) {
      __m256 xv = _mm256_loadu_ps(x + r * k + kk);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  if (kk < k) {
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = load_w_tail<kBf16>(a.w, (col0 + c * spacing) * k + kk, k - kk);
    for (int r = 0; r < R; ++r) {
      __m256 xv = load_x_tail(x + r * k + kk, k - kk);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) a.out[(row0 + r) * a.m + col0 + c * spacing] = sum_lanes(acc[r][c]);
}

template <int C, bool kBf16>
void row_tiles(const MatmulArgs& a, int64_t row_begin, int64_t row_end, int64_t col0, int64_t spacing) {
  int64_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) tile<4, C, kBf16>(a, r, col0, spacing);
  switch (row_end - r) {
    case 3: tile<3, C, kBf16>(a, r, col0, spacing); break;
    case 2: tile<2, C, kBf16>(a, r, col0, spacing); break;
    case 1: tile<1, C, kBf16>(a, r, col0, spacing); break;
    default: break;
  }
}

template <bool kBf16>
void matmul(const MatmulArgs& a, int64_t col_begin, int64_t col_end) {
  for (int64_t panel = 0; panel < a.n; panel += kRowPanel) {
    int64_t panel_end = std::min(a.n, panel + kRowPanel);
    spaced_column_tiles<2>(
        col_begin, col_end, [&](int64_t c, int64_t spacing) { row_tiles<2, kBf16>(a, panel, panel_end, c, spacing); },
        [&](int64_t c) { row_tiles<1, kBf16>(a, panel, panel_end, c, 1); });
  }
}

}  // namespace

MatmulKernels matmul_kernels_avx2() { return {"avx2", matmul<false>, matmul<true>, quant_matmul_avx2(), quant_row_avx2()}; }

}  // namespace lockstep::cpu
