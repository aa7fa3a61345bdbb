// AVX2 matmul straight from quantized rows, for passes of a few rows (decode rounds): each
// weight row is decoded 32 values at a time into four registers and multiplied in as the f32
// kernel (matmul_avx2.cpp) multiplies a loaded row: the same 8 lanes, the same fused
// multiply-adds over k in order, the same final sum (avx2_lanes.h). The decoded values are
// exactly the format's (quant_blocks.h and tensor/quant.h: the same operations in the same
// order), so the bits are those of the f32 matmul of the dequantized weight. Formats without a
// decoder here, and wider passes, go through matmul_quantized's dequantized scratch, which the
// same decoders fill.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "backend/cpu/avx2_lanes.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/quant_blocks.h"

namespace lockstep::cpu {
namespace {

using namespace quant_blocks;

namespace decoders {

inline __m128i load16(const std::byte* at) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at)); }

// The values of the low 8 bytes of `bytes` as floats, the bytes read as signed or unsigned.
inline __m256 signed_values(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)); }
inline __m256 unsigned_values(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)); }
inline __m128i high_half(__m128i bytes) { return _mm_unpackhi_epi64(bytes, bytes); }

// 16 bytes' 4-bit fields at `shift` (0: the low nibbles, 4: the high ones).
inline __m128i nibbles(__m128i bytes, int shift) {
  return _mm_and_si128(_mm_srli_epi16(bytes, shift), _mm_set1_epi8(0x0f));
}

// Codes 0 to 15 and 16 to 31 of a pair (two vectors of 16 bytes) as float(code) * scale, each
// value one rounding.
inline void times(__m128i first, __m128i last, bool is_signed, __m256 scale, __m256 w[4]) {
  const __m128i codes[4] = {first, high_half(first), last, high_half(last)};
  for (int q = 0; q < 4; ++q)
    w[q] = _mm256_mul_ps(is_signed ? signed_values(codes[q]) : unsigned_values(codes[q]), scale);
}

// The 32 values of pair j (k offsets 32 * j to 32 * j + 31) of one stored row, as four __m256
// of 8 (every format here has blocks or groups of 32 values or more, so one scale serves all).
struct Q8_0 {
  void operator()(const std::byte* row, int64_t j, __m256 w[4]) const {
    const std::byte* block = row + j * 34;
    const __m256 d = _mm256_set1_ps(half(load_u16(block)));
    times(load16(block + 2), load16(block + 18), true, d, w);  // float(q) * d
  }
};

struct Q4_0 {
  void operator()(const std::byte* row, int64_t j, __m256 w[4]) const {
    const std::byte* block = row + j * 18;
    const __m256 d = _mm256_set1_ps(half(load_u16(block)));
    const __m128i bytes = load16(block + 2), eight = _mm_set1_epi8(8);
    // Values 0 to 15 are the low nibbles, 16 to 31 the high ones: float(q - 8) * d.
    times(_mm_sub_epi8(nibbles(bytes, 0), eight), _mm_sub_epi8(nibbles(bytes, 4), eight), true, d, w);
  }
};

// GGUF's other blocks of 32: Q4_1 (d, m, nibbles: d * q + m), Q5_0 (d, qh, nibbles: d * (q -
// 16), q's fifth bit bit j of qh), Q5_1 (d, m, qh, nibbles: d * q + m) and IQ4_NL (d, nibbles:
// d * table[q]): a product, then the min added, as the reference rounds them.
template <QuantFormat kFormat>
struct Block32 {
  static constexpr bool kMin = kFormat == QuantFormat::q4_1 || kFormat == QuantFormat::q5_1;
  static constexpr bool kFive = kFormat == QuantFormat::q5_0 || kFormat == QuantFormat::q5_1;
  static constexpr int kBytes = 18 + (kMin ? 2 : 0) + (kFive ? 4 : 0);
  // 16 bits of qh as 16 bytes, each 16 where its bit is set.
  static __m128i fifth_bits(uint32_t bits16) {
    const __m128i spread = _mm_shuffle_epi8(_mm_set1_epi16(int16_t(bits16)),
                                            _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    const __m128i each = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(spread, each), each), _mm_set1_epi8(16));
  }
  void operator()(const std::byte* row, int64_t j, __m256 w[4]) const {
    const std::byte* block = row + j * kBytes;
    const __m256 d = _mm256_set1_ps(half(load_u16(block)));
    const std::byte* qh = block + (kMin ? 4 : 2);
    const __m128i bytes = load16(qh + (kFive ? 4 : 0));
    __m128i first = nibbles(bytes, 0), last = nibbles(bytes, 4);
    bool is_signed = false;
    if constexpr (kFormat == QuantFormat::iq4_nl) {
      const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues));
      first = _mm_shuffle_epi8(table, first), last = _mm_shuffle_epi8(table, last), is_signed = true;
    } else if constexpr (kFive) {
      uint32_t bits;
      std::memcpy(&bits, qh, 4);
      first = _mm_or_si128(first, fifth_bits(bits & 0xFFFF)), last = _mm_or_si128(last, fifth_bits(bits >> 16));
      if constexpr (!kMin) {
        const __m128i sixteen = _mm_set1_epi8(16);
        first = _mm_sub_epi8(first, sixteen), last = _mm_sub_epi8(last, sixteen), is_signed = true;
      }
    }
    times(first, last, is_signed, d, w);  // float(q) * d
    if constexpr (kMin) {
      const __m256 m = _mm256_set1_ps(half(load_u16(block + 2)));
      for (int q = 0; q < 4; ++q) w[q] = _mm256_add_ps(w[q], m);
    }
  }
};

// MLX affine, 4 or 8 bits (kBits), scales and biases of kScale: float(q) * scale + bias, two
// roundings.
template <int kBits, DType kScale>
struct Affine {
  AffineLayout layout;
  static constexpr bool kScalesAfterCodes = true;  // spaced_one_row_tiles
  void operator()(const std::byte* row, int64_t j, __m256 w[4]) const {
    __m128i first, last;
    if constexpr (kBits == 4) {
      // Values from the low bits of each little-endian word: a byte holds two, low nibble first.
      const __m128i packed = load16(row + 16 * j);
      const __m128i low = nibbles(packed, 0), high = nibbles(packed, 4);
      first = _mm_unpacklo_epi8(low, high);
      last = _mm_unpackhi_epi8(low, high);
    } else {
      first = load16(row + 32 * j);
      last = load16(row + 32 * j + 16);
    }
    constexpr size_t size = dtype_size(kScale);
    const size_t g = size_t(j >> layout.pairs_shift);
    const __m256 scale = _mm256_set1_ps(load_scale(kScale, row + layout.scales_at + g * size));
    const __m256 bias = _mm256_set1_ps(load_scale(kScale, row + layout.biases_at + g * size));
    times(first, last, false, scale, w);
    for (int q = 0; q < 4; ++q) w[q] = _mm256_add_ps(w[q], bias);
  }
};

// Q4_K and Q5_K: scale * float(q) - min, two roundings. A block's 8 scales and mins are made once,
// at its first pair (the state, k_block_scales).
template <bool kFive>
struct Q45K {
  struct State {
    KBlockScales block;
  };
  void operator()(const std::byte* row, int64_t j, __m256 w[4], State& state) const {
    const std::byte* block = row + (j / 8) * (kFive ? 176 : 144);
    const int sub = int(j % 8);
    if (sub == 0) k_block_scales(block, state.block);
    const std::byte* qs = block + (kFive ? 48 : 16) + 32 * (sub / 2);
    const int shift = sub % 2 ? 4 : 0;
    __m128i first = nibbles(load16(qs), shift), last = nibbles(load16(qs + 16), shift);
    if constexpr (kFive) {  // bit `sub` of qh[l], as the code's fifth bit
      const __m128i one = _mm_set1_epi8(1);
      const __m128i h0 = load16(block + 16), h1 = load16(block + 32);
      first = _mm_or_si128(first, _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(h0, sub), one), 4));
      last = _mm_or_si128(last, _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(h1, sub), one), 4));
    }
    times(first, last, false, _mm256_set1_ps(state.block.scale[sub]), w);
    const __m256 min = _mm256_set1_ps(state.block.min[sub]);
    for (int q = 0; q < 4; ++q) w[q] = _mm256_sub_ps(w[q], min);
  }
};

// Q6_K (q6k_pair): scale * float(q - 32), the first 16 values with one scale, the last 16 with
// the other.
struct Q6K {
  void operator()(const std::byte* row, int64_t j, __m256 w[4]) const {
    const Q6KPair p = q6k_pair(row, j);
    auto codes = [&](int at) {  // q - 32, as signed bytes
      __m128i low = _mm_and_si128(_mm_srl_epi16(load16(p.ql + at), _mm_cvtsi32_si128(p.low_shift)), _mm_set1_epi8(0x0f));
      __m128i high = _mm_and_si128(_mm_srl_epi16(load16(p.qh + at), _mm_cvtsi32_si128(p.high_shift)), _mm_set1_epi8(0x03));
      return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
    };
    const __m128i first = codes(0), last = codes(16);
    const __m256 s0 = _mm256_set1_ps(p.scale0), s1 = _mm256_set1_ps(p.scale1);
    w[0] = _mm256_mul_ps(s0, signed_values(first));
    w[1] = _mm256_mul_ps(s0, signed_values(high_half(first)));
    w[2] = _mm256_mul_ps(s1, signed_values(last));
    w[3] = _mm256_mul_ps(s1, signed_values(high_half(last)));
  }
};

// FP8 e4m3: the codes, then an f32 scale per group. A code's value is built in the register as
// matmul_quant_avx512.cpp builds it (exactly tensor/quant.h's e4m3_to_f32, no f32 subnormal on
// the way): exponent and mantissa bits placed, 120 added to the exponent; a subnormal code as
// 2^-6 * (1 + m/8) less 2^-6; the NaN codes the quiet NaN; the sign set. Then times the scale.
struct Fp8 {
  int pairs_shift;  // as AffineLayout's
  int64_t k;
  static constexpr bool kScalesAfterCodes = true;  // spaced_one_row_tiles
  static __m256 values(__m128i codes) {
    const __m256i wide = _mm256_cvtepu8_epi32(codes);
    const __m256i low = _mm256_and_si256(wide, _mm256_set1_epi32(0x7f));
    const __m256i placed = _mm256_slli_epi32(low, 20);
    const __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(placed, _mm256_set1_epi32(120 << 23)));
    const __m256 lifted = _mm256_castsi256_ps(_mm256_add_epi32(placed, _mm256_set1_epi32(121 << 23)));
    const __m256 subnormal = _mm256_sub_ps(lifted, _mm256_set1_ps(0x1p-6f));  // no lane gives an f32 subnormal
    const __m256i is_subnormal = _mm256_cmpeq_epi32(_mm256_and_si256(low, _mm256_set1_epi32(0x78)), _mm256_setzero_si256());
    __m256 magnitude = _mm256_blendv_ps(normal, subnormal, _mm256_castsi256_ps(is_subnormal));
    const __m256i is_nan = _mm256_cmpeq_epi32(low, _mm256_set1_epi32(0x7f));
    magnitude = _mm256_blendv_ps(magnitude, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), _mm256_castsi256_ps(is_nan));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(wide, _mm256_set1_epi32(0x80)), 24);
    return _mm256_or_ps(magnitude, _mm256_castsi256_ps(sign));
  }
  void operator()(const std::byte* row, int64_t j, __m256 w[4]) const {
    const __m128i first = load16(row + 32 * j), last = load16(row + 32 * j + 16);
    float s;
    std::memcpy(&s, row + k + 4 * (j >> pairs_shift), 4);
    const __m256 scale = _mm256_set1_ps(s);
    const __m128i codes[4] = {first, high_half(first), last, high_half(last)};
    for (int q = 0; q < 4; ++q) w[q] = _mm256_mul_ps(values(codes[q]), scale);  // e4m3(code) * scale
  }
};

}  // namespace decoders

template <class Decode>
inline void decode_pair(const Decode& decode, const std::byte* row, int64_t j, __m256 w[4], StateOf<Decode>& state) {
  if constexpr (std::is_same_v<StateOf<Decode>, NoState>)
    decode(row, j, w);
  else
    decode(row, j, w, state);
}

// out[r][c] for R rows from r0 and C columns c0, c0 + spacing, .... A column's 32 values are
// decoded, then multiplied into each row's sum before the next column's are decoded: 16
// registers hold R * C sums and one column's four vectors.
template <int R, int C, class Decode>
void tile(const MatmulArgs& a, const Decode& decode, size_t row_bytes, int64_t r0, int64_t c0, int64_t spacing) {
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  const std::byte* rows[C];
  for (int c = 0; c < C; ++c) rows[c] = static_cast<const std::byte*>(a.w) + size_t(c0 + c * spacing) * row_bytes;
  const float* x = a.x + r0 * a.k;
  const int64_t steps = a.k / 32;
  const NextTilePrefetch prefetch(rows[C - 1] + row_bytes, spacing == 1 ? size_t(C) * row_bytes : 0, steps);
  StateOf<Decode> state[C];
  for (int64_t j = 0; j < steps; ++j) {
    prefetch.step(j);
    for (int c = 0; c < C; ++c) {
      __m256 w[4];
      decode_pair(decode, rows[c], j, w, state[c]);
      for (int r = 0; r < R; ++r) {
        // The lanes' sums take k in order, 8 values at a time, as the f32 kernel's do.
        const float* xr = x + r * a.k + 32 * j;
        for (int q = 0; q < 4; ++q) acc[r][c] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 8 * q), w[q], acc[r][c]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) a.out[(r0 + r) * a.m + c0 + c * spacing] = sum_lanes(acc[r][c]);
}

template <int R, int C, class Decode>
void row_tiles(const MatmulArgs& a, const Decode& decode, size_t row_bytes, int64_t c0, int64_t spacing) {
  int64_t r = 0;
  for (; r + R <= a.n; r += R) tile<R, C>(a, decode, row_bytes, r, c0, spacing);
  for (; r < a.n; ++r) tile<1, C>(a, decode, row_bytes, r, c0, spacing);
}

struct Avx2 {
  using Q8_0 = decoders::Q8_0;
  using Q4_0 = decoders::Q4_0;
  template <QuantFormat kFormat>
  using Block32 = decoders::Block32<kFormat>;
  using Q4K = decoders::Q45K<false>;
  using Q5K = decoders::Q45K<true>;
  using Q6K = decoders::Q6K;
  template <int kBits, DType kScale>
  using Affine = decoders::Affine<kBits, kScale>;
  using Fp8 = decoders::Fp8;
  // One row: tiles of 8 columns, so 8 sums are under way (measured on a first-generation Zen
  // core, one thread, a [4096, 4096] weight: 10% faster than 4 in q8_0, 13% in Q4_K); two: 2 by
  // 4; more: 4 rows by 2 columns.
  template <class Decode>
  static void fused(const MatmulArgs& a, const Decode& decode, size_t row_bytes, int64_t col_begin, int64_t col_end) {
    if (a.n == 1 && spaced_one_row_tiles<Decode>) {
      spaced_column_tiles<8>(
          col_begin, col_end, [&](int64_t c, int64_t spacing) { row_tiles<1, 8>(a, decode, row_bytes, c, spacing); },
          [&](int64_t c) { row_tiles<1, 1>(a, decode, row_bytes, c, 1); });
      return;
    }
    int64_t c = col_begin;
    if (a.n <= 2) {
      for (; c + 4 <= col_end; c += 4) row_tiles<2, 4>(a, decode, row_bytes, c, 1);
    } else {
      for (; c + 2 <= col_end; c += 2) row_tiles<4, 2>(a, decode, row_bytes, c, 1);
    }
    for (; c < col_end; ++c) row_tiles<4, 1>(a, decode, row_bytes, c, 1);
  }
  template <class Decode>
  static void dequantize(const Decode& decode, const std::byte* row, int64_t k, float* out) {
    StateOf<Decode> state;
    for (int64_t j = 0; j < k / 32; ++j) {
      __m256 w[4];
      decode_pair(decode, row, j, w, state);
      for (int q = 0; q < 4; ++q) _mm256_storeu_ps(out + 32 * j + 8 * q, w[q]);
    }
  }
};

}  // namespace

QuantMatmulFn quant_matmul_avx2() { return fused_pass<Avx2>; }
QuantRowFn quant_row_avx2() { return dequantize_pass<Avx2>; }

}  // namespace lockstep::cpu
