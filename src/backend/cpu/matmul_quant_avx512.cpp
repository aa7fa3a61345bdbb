// AVX-512 matmul straight from quantized rows, for passes of a few rows (decode rounds): each
// weight row is decoded 32 values at a time into two registers and multiplied in as the f32
// kernel (matmul_avx512.cpp) multiplies a loaded row: the same lanes, the same fused
// multiply-adds over k in order, the same final sum. The decoded values are exactly the
// format's (tensor/quant.h: the same operations in the same order), so the bits are those of
// the f32 matmul of the dequantized weight. Formats without a decoder here, and wider passes,
// go through matmul_quantized's dequantized scratch, which the same decoders fill.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend/cpu/matmul.h"
#include "backend/cpu/quant_blocks.h"
#include "tensor/quant.h"

namespace lockstep::cpu {
namespace {

using namespace quant_blocks;

namespace decoders {

// 0, 1, ..., 15 and 16, ..., 31 as floats: the codes a 4- or 5-bit block's table is built from.
inline __m512 codes_0_15() { return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
inline __m512 codes_16_31() {
  return _mm512_setr_ps(16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
}

// The value of each of 16 codes (bytes below 16) from a table of the block's 16 values, each
// computed once with the format's own operations, so the bits are those of decoding every code
// in turn: a permute in place of a convert and a multiply (or two) per 16 values. (Formats of 32
// codes look up in two tables, _mm512_permutex2var_ps.)
inline __m512 look_up(__m128i codes, __m512 table) { return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(codes), table); }

// 5-bit codes for a look-up in two tables: a code's low 4 bits (widened bytes, masked, or
// shifted down from the high nibble) with 16 added where its fifth bit is set.
inline __m512i low_nibbles(__m512i wide) { return _mm512_and_si512(wide, _mm512_set1_epi32(0xF)); }
inline __m512i with_fifth_bit(__m512i four_bits, __mmask16 fifth) {
  return _mm512_mask_or_epi32(four_bits, fifth, four_bits, _mm512_set1_epi32(16));
}

// The 32 values of pair j (k offsets 32 * j to 32 * j + 31) of one stored row, as two __m512 of
// 16 (every format here has blocks or groups of 32 values or more, so one scale serves both).
struct Q8_0 {
  void operator()(const std::byte* row, int64_t j, __m512& w0, __m512& w1) const {
    const std::byte* block = row + j * 34;
    const __m512 d = _mm512_set1_ps(half(load_u16(block)));
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18));
    w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d);  // float(q) * d
    w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d);
  }
};

struct Q4_0 {
  void operator()(const std::byte* row, int64_t j, __m512& w0, __m512& w1) const {
    const std::byte* block = row + j * 18;
    const __m512 d = _mm512_set1_ps(half(load_u16(block)));
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    const __m512 table = _mm512_mul_ps(d, _mm512_sub_ps(codes_0_15(), _mm512_set1_ps(8)));  // d * float(q - 8)
    // Values 0 to 15 are the low nibbles, 16 to 31 the high ones: the 16 bytes widened once, and
    // each value looked up by its nibble (the permute reads an index's low 4 bits only). One
    // widening in place of two: one row of [4096, 4096] from cache 0.28 to 0.31 -> 0.22 ms.
    const __m512i wide = _mm512_cvtepu8_epi32(bytes);
    w0 = _mm512_permutexvar_ps(wide, table);
    w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(wide, 4), table);
  }
};

// GGUF's other blocks of 32: Q4_1 (d, m, nibbles: d * q + m), Q5_0 (d, qh, nibbles: d * (q -
// 16), q's fifth bit bit j of qh), Q5_1 (d, m, qh, nibbles: d * q + m) and IQ4_NL (d, nibbles:
// d * table[q]), each value looked up in a table of the block's 16 or 32 values computed with
// the reference's operations (a product, then the min added).
template <QuantFormat kFormat>
struct Block32 {
  static constexpr bool kMin = kFormat == QuantFormat::q4_1 || kFormat == QuantFormat::q5_1;
  static constexpr bool kFive = kFormat == QuantFormat::q5_0 || kFormat == QuantFormat::q5_1;
  static constexpr int kBytes = 18 + (kMin ? 2 : 0) + (kFive ? 4 : 0);
  void operator()(const std::byte* row, int64_t j, __m512& w0, __m512& w1) const {
    const std::byte* block = row + j * kBytes;
    const __m512 d = _mm512_set1_ps(half(load_u16(block)));
    const __m512 m = _mm512_set1_ps(kMin ? half(load_u16(block + 2)) : 0.0f);
    const std::byte* qh = block + (kMin ? 4 : 2);
    const __m512i wide = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + (kFive ? 4 : 0))));
    if constexpr (kFormat == QuantFormat::iq4_nl) {
      const __m512 values = _mm512_setr_ps(kIq4NlValues[0], kIq4NlValues[1], kIq4NlValues[2], kIq4NlValues[3],
                                           kIq4NlValues[4], kIq4NlValues[5], kIq4NlValues[6], kIq4NlValues[7],
                                           kIq4NlValues[8], kIq4NlValues[9], kIq4NlValues[10], kIq4NlValues[11],
                                           kIq4NlValues[12], kIq4NlValues[13], kIq4NlValues[14], kIq4NlValues[15]);
      const __m512 table = _mm512_mul_ps(d, values);  // d * table[q]
      w0 = _mm512_permutexvar_ps(wide, table);
      w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(wide, 4), table);
    } else if constexpr (!kFive) {  // q4_1
      const __m512 table = _mm512_add_ps(_mm512_mul_ps(d, codes_0_15()), m);
      w0 = _mm512_permutexvar_ps(wide, table);
      w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(wide, 4), table);
    } else {
      const __m512 offset = _mm512_set1_ps(kMin ? 0.0f : 16.0f);
      __m512 low = _mm512_mul_ps(d, _mm512_sub_ps(codes_0_15(), offset));
      __m512 high = _mm512_mul_ps(d, _mm512_sub_ps(codes_16_31(), offset));
      if constexpr (kMin) low = _mm512_add_ps(low, m), high = _mm512_add_ps(high, m);
      uint32_t bits;
      std::memcpy(&bits, qh, 4);
      w0 = _mm512_permutex2var_ps(low, with_fifth_bit(low_nibbles(wide), __mmask16(bits)), high);
      w1 = _mm512_permutex2var_ps(low, with_fifth_bit(_mm512_srli_epi32(wide, 4), __mmask16(bits >> 16)), high);
    }
  }
};

// MLX affine, 4 or 8 bits (kBits), scales and biases of kScale: float(q) * scale + bias, two
// roundings. A group's scale and bias are read once, at its first pair (the state), and at 4 bits
// its table of 16 values made there. The width and the scales' type are the decoder's type, not
// fields: read from the layout a pair, they left branches in the loop that took a third of the
// one-row time. kHalves: 4-bit codes in CodeOrder::halves (the pair's 16 bytes widened once, low
// nibbles values 0 to 15, high ones 16 to 31).
template <int kBits, DType kScale, bool kHalves = false>
struct Affine {
  AffineLayout layout;
  static constexpr bool kScalesAfterCodes = true;  // spaced_one_row_tiles
  struct State {
    __m512 scale, bias, table;
  };
  void operator()(const std::byte* row, int64_t j, __m512& w0, __m512& w1, State& state) const {
    if ((j & ((int64_t(1) << layout.pairs_shift) - 1)) == 0) {
      constexpr size_t size = dtype_size(kScale);
      const size_t g = size_t(j >> layout.pairs_shift);
      state.scale = _mm512_set1_ps(load_scale(kScale, row + layout.scales_at + g * size));
      state.bias = _mm512_set1_ps(load_scale(kScale, row + layout.biases_at + g * size));
      if constexpr (kBits == 4) state.table = _mm512_add_ps(_mm512_mul_ps(codes_0_15(), state.scale), state.bias);
    }
    if constexpr (kHalves) {
      // The look-up reads an index's low 4 bits only: the high nibbles shifted down, no mask.
      const __m512i wide = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * j)));
      w0 = _mm512_permutexvar_ps(wide, state.table);
      w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(wide, 4), state.table);
    } else if constexpr (kBits == 4) {
      // Values from the low bits of each little-endian word: a byte holds two, low nibble first.
      // The look-up reads an index's low 4 bits only, so nothing is masked: the low nibbles are
      // the bytes as they are, the high ones the bytes shifted right by 4.
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * j));
      const __m128i high = _mm_srli_epi16(packed, 4);
      w0 = look_up(_mm_unpacklo_epi8(packed, high), state.table);
      w1 = look_up(_mm_unpackhi_epi8(packed, high), state.table);
    } else {
      const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 32 * j));
      const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 32 * j + 16));
      w0 = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b0)), state.scale), state.bias);
      w1 = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b1)), state.scale), state.bias);
    }
  }
};

// Q4_K and Q5_K: a sub-block's 4 (or 5) bit codes, scale * float(q) - min (two roundings)
// looked up in the sub-block's table. A block's 8 scales and mins are made once, at its first
// pair (the state, k_block_scales), not a sub-block at a time: unpacking each sub-block's 6-bit
// codes alone, a dozen scalar operations and a branch, was most of a pair's work.
template <bool kFive>
struct Q45K {
  static constexpr int64_t kBlockBytes = kFive ? 176 : 144;
  struct State {
    KBlockScales block;
  };
  // Sub-block `sub`'s 16 values of codes 0 to 15 (or `codes` 16 to 31): scale * float(q) - min.
  static __m512 table(const KBlockScales& s, int sub, __m512 codes = codes_0_15()) {
    return _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(s.scale[sub]), codes), _mm512_set1_ps(s.min[sub]));
  }
  void operator()(const std::byte* row, int64_t j, __m512& w0, __m512& w1, State& state) const {
    const std::byte* block = row + (j / 8) * kBlockBytes;
    const int sub = int(j % 8);
    if (sub == 0) k_block_scales(block, state.block);
    const std::byte* qs = block + (kFive ? 48 : 16) + 32 * (sub / 2);
    const __m512 low = table(state.block, sub);
    __m512i i0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    __m512i i1 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16)));
    if (sub % 2) i0 = _mm512_srli_epi32(i0, 4), i1 = _mm512_srli_epi32(i1, 4);
    if constexpr (!kFive) {
      // The look-up reads an index's low 4 bits only: the high nibbles are shifted down, no mask.
      w0 = _mm512_permutexvar_ps(i0, low);
      w1 = _mm512_permutexvar_ps(i1, low);
      return;
    }
    // Q5_K: the fifth bit of code l is bit `sub` of qh[l], as a mask of the 32 codes; the four
    // low bits masked (the look-up of 32 values reads 5 index bits) and 16 added where it is set.
    const __mmask32 fifth = _mm256_test_epi8_mask(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 16)),
                                                  _mm256_set1_epi8(char(1 << sub)));
    if (sub % 2 == 0) i0 = low_nibbles(i0), i1 = low_nibbles(i1);  // (the high ones are shifted down)
    const __m512 high = table(state.block, sub, codes_16_31());
    w0 = _mm512_permutex2var_ps(low, with_fifth_bit(i0, __mmask16(fifth)), high);
    w1 = _mm512_permutex2var_ps(low, with_fifth_bit(i1, __mmask16(fifth >> 16)), high);
  }
  // Pairs j and j + 1 (j even): sub-blocks 2s and 2s + 1, whose codes are the low and the high
  // nibbles of the same 32 bytes (and for Q5_K bits 2s and 2s + 1 of the same qh), widened once
  // for both (one-row tiles).
  void two(const std::byte* row, int64_t j, __m512 (&w)[4], State& state) const {
    const std::byte* block = row + (j / 8) * kBlockBytes;
    const int sub = int(j % 8);
    if (sub == 0) k_block_scales(block, state.block);
    const __m512 low0 = table(state.block, sub), low1 = table(state.block, sub + 1);
    const std::byte* qs = block + (kFive ? 48 : 16) + 32 * (sub / 2);
    const __m512i wide0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    const __m512i wide1 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16)));
    if constexpr (!kFive) {
      w[0] = _mm512_permutexvar_ps(wide0, low0);
      w[1] = _mm512_permutexvar_ps(wide1, low0);
      w[2] = _mm512_permutexvar_ps(_mm512_srli_epi32(wide0, 4), low1);
      w[3] = _mm512_permutexvar_ps(_mm512_srli_epi32(wide1, 4), low1);
      return;
    }
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 16));
    const __mmask32 fifth0 = _mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(1 << sub)));
    const __mmask32 fifth1 = _mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(2 << sub)));
    const __m512i a0 = low_nibbles(wide0), a1 = low_nibbles(wide1);
    const __m512i b0 = _mm512_srli_epi32(wide0, 4), b1 = _mm512_srli_epi32(wide1, 4);
    const __m512 high0 = table(state.block, sub, codes_16_31()), high1 = table(state.block, sub + 1, codes_16_31());
    w[0] = _mm512_permutex2var_ps(low0, with_fifth_bit(a0, __mmask16(fifth0)), high0);
    w[1] = _mm512_permutex2var_ps(low0, with_fifth_bit(a1, __mmask16(fifth0 >> 16)), high0);
    w[2] = _mm512_permutex2var_ps(low1, with_fifth_bit(b0, __mmask16(fifth1)), high1);
    w[3] = _mm512_permutex2var_ps(low1, with_fifth_bit(b1, __mmask16(fifth1 >> 16)), high1);
  }
};

// Q6_K (q6k_codes): the pair's 32 codes made in one 256-bit register (4 bits of ql, 2 of
// qh, less 32 as signed bytes), widened 16 at a time and multiplied by their half's scale. A
// block's 16 scales, d * float(scale), are made once, at its first pair (the state).
struct Q6K {
  struct State {
    alignas(64) float scale[16];
  };
  void operator()(const std::byte* row, int64_t j, __m512& w0, __m512& w1, State& state) const {
    const std::byte* block = row + (j / 8) * 210;
    const int sub = int(j % 8);
    if (sub == 0) {
      const __m128i scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 192));
      const __m512 d = _mm512_set1_ps(half(load_u16(block + 208)));
      _mm512_store_ps(state.scale, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(scales))));
    }
    const Q6KCodes at = q6k_codes(block, sub);
    __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.ql));
    __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.qh));
    low = _mm256_and_si256(_mm256_srl_epi16(low, _mm_cvtsi32_si128(at.low_shift)), _mm256_set1_epi8(0x0f));
    high = _mm256_and_si256(_mm256_srl_epi16(high, _mm_cvtsi32_si128(at.high_shift)), _mm256_set1_epi8(0x03));
    const __m256i code = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(high, 4)), _mm256_set1_epi8(32));
    const __m512 first = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(code)));
    const __m512 last = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(code, 1)));
    w0 = _mm512_mul_ps(_mm512_set1_ps(state.scale[2 * sub]), first);
    w1 = _mm512_mul_ps(_mm512_set1_ps(state.scale[2 * sub + 1]), last);
  }
};

// FP8 e4m3: the codes, then an f32 scale per group. A code's value is built in the register,
// exactly tensor/quant.h's e4m3_to_f32, with no subnormal f32 on the way (an x86 core takes a
// slow assist for each): a normal code's exponent and mantissa bits placed in an f32's (bits 20
// to 26) with 120 added to the exponent (the bias, 127 against 7); a subnormal code (exponent 0)
// as 2^-6 * (1 + m/8) less 2^-6, exact; its sign set; the NaN codes (all seven low bits set) the
// quiet NaN with their sign. Then times the scale.
struct Fp8 {
  int pairs_shift;  // as AffineLayout's
  int64_t k;
  static constexpr bool kScalesAfterCodes = true;  // spaced_one_row_tiles
  static __m512 values(__m128i codes) {
    const __m512i wide = _mm512_cvtepu8_epi32(codes);
    const __m512i low = _mm512_and_si512(wide, _mm512_set1_epi32(0x7f));
    const __m512i placed = _mm512_slli_epi32(low, 20);
    __m512 magnitude = _mm512_castsi512_ps(_mm512_add_epi32(placed, _mm512_set1_epi32(120 << 23)));
    const __mmask16 subnormal = _mm512_testn_epi32_mask(low, _mm512_set1_epi32(0x78));
    const __m512 lifted = _mm512_castsi512_ps(_mm512_add_epi32(placed, _mm512_set1_epi32(121 << 23)));
    magnitude = _mm512_mask_sub_ps(magnitude, subnormal, lifted, _mm512_set1_ps(0x1p-6f));
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(low, _mm512_set1_epi32(0x7f));
    const __m512i bits = _mm512_mask_blend_epi32(nan, _mm512_castps_si512(magnitude), _mm512_set1_epi32(0x7fc00000));
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(wide, _mm512_set1_epi32(0x80)), 24);
    return _mm512_castsi512_ps(_mm512_or_si512(bits, sign));
  }
  void operator()(const std::byte* row, int64_t j, __m512& w0, __m512& w1) const {
    const __m128i c0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 32 * j));
    const __m128i c1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 32 * j + 16));
    float s;
    std::memcpy(&s, row + k + 4 * (j >> pairs_shift), 4);
    const __m512 scale = _mm512_set1_ps(s);
    w0 = _mm512_mul_ps(values(c0), scale);  // e4m3(code) * scale
    w1 = _mm512_mul_ps(values(c1), scale);
  }
};

}  // namespace decoders

template <class Decode>
inline void decode_pair(const Decode& decode, const std::byte* row, int64_t j, __m512& w0, __m512& w1,
                        StateOf<Decode>& state) {
  if constexpr (std::is_same_v<StateOf<Decode>, NoState>)
    decode(row, j, w0, w1);
  else
    decode(row, j, w0, w1, state);
}

// out[r][c] for R rows from r0 and C columns c0, c0 + spacing, ...: C independent sums a row, so
// the fused multiply-adds of one column do not wait on each other.
template <int R, int C, class Decode>
void tile(const MatmulArgs& a, const Decode& decode, size_t row_bytes, int64_t r0, int64_t c0, int64_t spacing) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  const std::byte* rows[C];
  for (int c = 0; c < C; ++c) rows[c] = static_cast<const std::byte*>(a.w) + size_t(c0 + c * spacing) * row_bytes;
  const float* x = a.x + r0 * a.k;
  const int64_t steps = a.k / 32;
  const NextTilePrefetch prefetch(rows[C - 1] + row_bytes, spacing == 1 ? size_t(C) * row_bytes : 0, steps);
  StateOf<Decode> state[C];
  if constexpr (R == 1 && requires(__m512 (&w)[4]) { decode.two(rows[0], int64_t(0), w, state[0]); }) {
    // Two pairs a step where the decoder shares work between them (Q4_K's sub-block pairs):
    // the same sums in the same order, 16 values at a time.
    for (int64_t j = 0; j < steps; j += 2) {
      prefetch.step(j), prefetch.step(j + 1);
      __m512 w[C][4];
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) decode.two(rows[c], j, w[c], state[c]);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        const __m512 xv = _mm512_loadu_ps(x + 32 * j + 16 * v);
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) acc[0][c] = _mm512_fmadd_ps(xv, w[c][v], acc[0][c]);
      }
    }
    for (int c = 0; c < C; ++c) a.out[r0 * a.m + c0 + c * spacing] = _mm512_reduce_add_ps(acc[0][c]);
    return;
  }
  for (int64_t j = 0; j < steps; ++j) {
    prefetch.step(j);
    __m512 w0[C], w1[C];
    for (int c = 0; c < C; ++c) decode_pair(decode, rows[c], j, w0[c], w1[c], state[c]);
    for (int r = 0; r < R; ++r) {
      // The lanes' sums take k in order, 16 values at a time, as the f32 kernel's do.
      const __m512 x0 = _mm512_loadu_ps(x + r * a.k + 32 * j), x1 = _mm512_loadu_ps(x + r * a.k + 32 * j + 16);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(x0, w0[c], acc[r][c]);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(x1, w1[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) a.out[(r0 + r) * a.m + c0 + c * spacing] = _mm512_reduce_add_ps(acc[r][c]);
}

template <int C, class Decode>
void row_tiles(const MatmulArgs& a, const Decode& decode, size_t row_bytes, int64_t c0, int64_t spacing) {
  int64_t r = 0;
  for (; r + 4 <= a.n; r += 4) tile<4, C>(a, decode, row_bytes, r, c0, spacing);
  switch (a.n - r) {
    case 3: tile<3, C>(a, decode, row_bytes, r, c0, spacing); break;
    case 2: tile<2, C>(a, decode, row_bytes, r, c0, spacing); break;
    case 1: tile<1, C>(a, decode, row_bytes, r, c0, spacing); break;
    default: break;
  }
}

struct Avx512 {
  using Q8_0 = decoders::Q8_0;
  using Q4_0 = decoders::Q4_0;
  template <QuantFormat kFormat>
  using Block32 = decoders::Block32<kFormat>;
  using Q4K = decoders::Q45K<false>;
  using Q5K = decoders::Q45K<true>;
  using Q6K = decoders::Q6K;
  template <int kBits, DType kScale>
  using Affine = decoders::Affine<kBits, kScale>;
  template <DType kScale>
  using AffineHalves = decoders::Affine<4, kScale, true>;
  using Fp8 = decoders::Fp8;
  template <class Decode>
  static void fused(const MatmulArgs& a, const Decode& decode, size_t row_bytes, int64_t col_begin, int64_t col_end) {
    if (a.n == 1 && spaced_one_row_tiles<Decode>) {
      spaced_column_tiles<4>(
          col_begin, col_end, [&](int64_t c, int64_t spacing) { row_tiles<4>(a, decode, row_bytes, c, spacing); },
          [&](int64_t c) { row_tiles<1>(a, decode, row_bytes, c, 1); });
      return;
    }
    int64_t c = col_begin;
    for (; c + 4 <= col_end; c += 4) row_tiles<4>(a, decode, row_bytes, c, 1);
    for (; c < col_end; ++c) row_tiles<1>(a, decode, row_bytes, c, 1);
  }
  template <class Decode>
  static void dequantize(const Decode& decode, const std::byte* row, int64_t k, float* out) {
    StateOf<Decode> state;
    for (int64_t j = 0; j < k / 32; ++j) {
      __m512 w0, w1;
      decode_pair(decode, row, j, w0, w1, state);
      _mm512_storeu_ps(out + 32 * j, w0);
      _mm512_storeu_ps(out + 32 * j + 16, w1);
    }
  }
};

}  // namespace

QuantMatmulFn quant_matmul_avx512() { return fused_pass<Avx512>; }
QuantRowFn quant_row_avx512() { return dequantize_pass<Avx512>; }

}  // namespace lockstep::cpu
