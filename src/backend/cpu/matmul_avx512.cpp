// AVX-512 matmul: 16-lane accumulators, tiles of up to 4 rows by 4 columns.
// GCC 12's own AVX-512 headers trip its uninitialized-use warnings (their _mm512_undefined_*
// placeholders); the warnings are about the headers, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/matmul.h"

namespace lockstep::cpu {
namespace {

template <bool kBf16>
inline __m512 load_w(const void* w, int64_t offset) {
  if constexpr (kBf16) {
    __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(w) + offset));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(words), 16));
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(w) + offset);
  }
}

template <bool kBf16>
inline __m512 load_w_tail(const void* w, int64_t offset, __mmask16 mask) {
  if constexpr (kBf16) {
    __m256i words = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(w) + offset);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(words), 16));
  } else {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(w) + offset);
  }
}

// out[r][c] for R rows starting at row0 and C columns starting at col0.
template <int R, int C, bool kBf16>
void tile(const MatmulArgs& a, int64_t row0, int64_t col0, int64_t spacing) {
  const int64_t k = a.k;
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  const float* x = a.x + row0 * k;
  int64_t kk = 0;
  for (; kk + 16 <= k; kk += 16) {
    __m512 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = load_w<kBf16>(a.w, (col0 + c * spacing) * k + kk);
    for (int r = 0; r < R; ++r) {
      __m512 xv = _mm512_loadu_ps(x + r * k + kk);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  if (kk < k) {
    __mmask16 mask = __mmask16((1u << (k - kk)) - 1);
    __m512 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = load_w_tail<kBf16>(a.w, (col0 + c * spacing) * k + kk, mask);
    for (int r = 0; r < R; ++r) {
      __m512 xv = _mm512_maskz_loadu_ps(mask, x + r * k + kk);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) a.out[(row0 + r) * a.m + col0 + c * spacing] = _mm512_reduce_add_ps(acc[r][c]);
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
    spaced_column_tiles<4>(
        col_begin, col_end, [&](int64_t c, int64_t spacing) { row_tiles<4, kBf16>(a, panel, panel_end, c, spacing); },
        [&](int64_t c) { row_tiles<1, kBf16>(a, panel, panel_end, c, 1); });
  }
}

}  // namespace

MatmulKernels matmul_kernels_avx512() {
  return {"avx512", matmul<false>, matmul<true>, quant_matmul_avx512(), quant_row_avx512(), true};
}

}  // namespace lockstep::cpu
