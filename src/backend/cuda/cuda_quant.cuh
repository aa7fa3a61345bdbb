// Quantized weights on the device: eight values at a time from a stored row (Tensor::quant's
// layout: each row is its values, then its scales, then its biases), each value exactly the f32
// that quant.h's dequantize_row gives on the host. Every product and sum is rounded on its own
// (__fmul_rn, __fadd_rn: never fused), in the order the host code rounds them, so a matmul that
// reads weights through QuantWeights (the K-quants', 2-bit affine's: cuda_matmul.cu,
// cuda_matmul_quant.cu) is bit for bit the f32 matmul of the dequantized values, and embed gives
// the exact values. The other formats' matmuls run on the tensor cores (quant_on_tensor_cores,
// cuda_matmul_quant_mma.cu), within a tolerance of that.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_launches.cuh"
#include "backend/cuda/cuda_matmul.cuh"
#include "tensor/quant_layout.h"

namespace lockstep::cuda {

// The decoders, one per format (and per bit width for MLX affine: the shifts are constants).
enum class QuantKind {
  q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q4_k, q5_k, q6_k, affine2, affine3, affine4, affine5, affine6, affine8, fp8
};

// The kind that decodes `layout`; false for one the device does not read (FP8 with one scale
// for the tensor, which stored tensors never use: quantized_weights.cpp repeats it per block).
bool quant_kind_of(const QuantLayout& layout, QuantKind* kind);

// f(std::integral_constant<QuantKind, kind>{}): one instantiation of a kernel per kind.
template <class F>
void with_quant_kind(QuantKind kind, F&& f) {
  using K = QuantKind;
  switch (kind) {
    case K::q8_0: return f(std::integral_constant<K, K::q8_0>{});
    case K::q4_0: return f(std::integral_constant<K, K::q4_0>{});
    case K::q4_1: return f(std::integral_constant<K, K::q4_1>{});
    case K::q5_0: return f(std::integral_constant<K, K::q5_0>{});
    case K::q5_1: return f(std::integral_constant<K, K::q5_1>{});
    case K::iq4_nl: return f(std::integral_constant<K, K::iq4_nl>{});
    case K::q4_k: return f(std::integral_constant<K, K::q4_k>{});
    case K::q5_k: return f(std::integral_constant<K, K::q5_k>{});
    case K::q6_k: return f(std::integral_constant<K, K::q6_k>{});
    case K::affine2: return f(std::integral_constant<K, K::affine2>{});
    case K::affine3: return f(std::integral_constant<K, K::affine3>{});
    case K::affine4: return f(std::integral_constant<K, K::affine4>{});
    case K::affine5: return f(std::integral_constant<K, K::affine5>{});
    case K::affine6: return f(std::integral_constant<K, K::affine6>{});
    case K::affine8: return f(std::integral_constant<K, K::affine8>{});
    case K::fp8: return f(std::integral_constant<K, K::fp8>{});
  }
}

// An MLX affine kind's bits a code (0 for the other kinds).
constexpr int affine_bits(QuantKind kind) {
  switch (kind) {
    case QuantKind::affine2: return 2;
    case QuantKind::affine3: return 3;
    case QuantKind::affine4: return 4;
    case QuantKind::affine5: return 5;
    case QuantKind::affine6: return 6;
    case QuantKind::affine8: return 8;
    default: return 0;
  }
}

// IQ4_NL's table (tensor/quant_layout.h) where device code can index it.
static __device__ const int8_t kIq4NlDevice[16] = {
    kIq4NlValues[0], kIq4NlValues[1], kIq4NlValues[2],  kIq4NlValues[3],  kIq4NlValues[4],  kIq4NlValues[5],
    kIq4NlValues[6], kIq4NlValues[7], kIq4NlValues[8],  kIq4NlValues[9],  kIq4NlValues[10], kIq4NlValues[11],
    kIq4NlValues[12], kIq4NlValues[13], kIq4NlValues[14], kIq4NlValues[15]};

__device__ inline uint16_t load_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__device__ inline float f16_at(const uint8_t* p) { return __half2float(__ushort_as_half(load_u16(p))); }
__device__ inline float bf16_at(const uint8_t* p) { return __uint_as_float(uint32_t(load_u16(p)) << 16); }
__device__ inline float f32_at(const uint8_t* p) { return *reinterpret_cast<const float*>(p); }

// Eight bytes from a 2-byte-aligned address as two little-endian words: bytes 0-3, then 4-7.
__device__ inline void load_words2(const uint8_t* p, uint32_t (&out)[2]) {
#pragma unroll
  for (int w = 0; w < 2; ++w) out[w] = uint32_t(load_u16(p + 4 * w)) | uint32_t(load_u16(p + 4 * w + 2)) << 16;
}

// Eight bytes from a 2-byte-aligned address, byte i in out[i].
__device__ inline void load_bytes8(const uint8_t* p, uint8_t (&out)[8]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint16_t two = load_u16(p + 2 * i);
    out[2 * i] = uint8_t(two), out[2 * i + 1] = uint8_t(two >> 8);
  }
}

// float(v) - offset for integers 0 <= v < 2^23 and offset < 2^23, exact: 2^23 + v has v in its
// low mantissa bits, so one subtraction gives it (where an int-to-float conversion would take
// the slower conversion unit).
template <int kOffset>
__device__ inline float small_int(uint32_t v) {
  return __fsub_rn(__uint_as_float(0x4B000000u | v), float((1 << 23) + kOffset));
}

// small_int<kOffset> of byte `j` of `bytes` (each byte < 2^8), one byte permute for the magic
// number's bits: [byte j, 0, 0, 0x4B] is 2^23 + byte j.
template <int kOffset>
__device__ inline float small_int_of_byte(uint32_t bytes, int j) {
  return __fsub_rn(__uint_as_float(__byte_perm(bytes, 0x4B000000u, 0x7650u | uint32_t(j))), float((1 << 23) + kOffset));
}

// Eight 4-bit codes, code i in bits 4i .. 4i + 3 of `word`, as small_int<kOffset> each: the low
// and the high nibbles masked once for all bytes, then a byte permute a code.
template <int kOffset>
__device__ inline void small_ints_of_nibbles(uint32_t word, float (&out)[8]) {
  const uint32_t low = word & 0x0F0F0F0Fu, high = (word >> 4) & 0x0F0F0F0Fu;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    out[2 * j] = small_int_of_byte<kOffset>(low, j);
    out[2 * j + 1] = small_int_of_byte<kOffset>(high, j);
  }
}

// e4m3 "fn" to f32, exact (quant.cpp's e4m3_to_f32): its exponent and mantissa bits placed in an
// f32's (a subnormal stays one), scaled by 2^120 for the exponent bias, 127 against 7.
__device__ inline float e4m3_value(uint8_t code) {
  if ((code & 0x7f) == 0x7f) return __uint_as_float(0x7fc00000u | uint32_t(code & 0x80) << 24);
  const float magnitude = __fmul_rn(__uint_as_float(uint32_t(code & 0x7f) << 20), 0x1p120f);
  return __uint_as_float(__float_as_uint(magnitude) | uint32_t(code & 0x80) << 24);
}

// Q4_K and Q5_K's six-bit scale and min of sub-block j (quant_gguf.cpp's scale_min_k4).
__device__ inline void scale_min_k4(int j, const uint8_t* scales, float& sc, float& m) {
  if (j < 4) {
    sc = float(scales[j] & 63), m = float(scales[j + 4] & 63);
  } else {
    sc = float((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    m = float((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// Where a quantized weight's rows and their parts are: rows of k values, `row_bytes` each, one
// matrix after another in a stack (the MoE experts).
struct QuantView {
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
  size_t values_bytes = 0;  // affine, fp8: where a row's scales start
  size_t scales_bytes = 0;  // affine: where a row's biases start, after the scales
  int group_shift = 0;      // affine, fp8: log2 of the values a scale (32, 64 or 128)
  DType scale_type = DType::f32;
};

inline void key_add(LaunchKey& key, const QuantView& v) {
  static_assert(sizeof(QuantView) == 40, "key_add(QuantView) must list every field");
  key_add(key, v.data), key_add(key, v.row_bytes), key_add(key, v.values_bytes), key_add(key, v.scales_bytes);
  key_add(key, v.group_shift), key_add(key, v.scale_type);
}

// The view of `layout`'s rows of k values at `data` (cuda_quant.cu).
QuantView quant_view(const void* data, const QuantLayout& layout, int64_t k);

// A QuantView that decodes: load8 gives eight values of a row.
template <QuantKind kKind>
struct QuantWeights : QuantView {

  // Row `col` of matrix `matrix` of a stack whose matrices are `stride` values apart (k a row).
  __device__ const uint8_t* row(int64_t matrix, int64_t stride, int64_t col, int64_t k) const {
    const int64_t rows_per_matrix = k ? stride / k : 0;
    return data + (size_t(matrix) * size_t(rows_per_matrix) + size_t(col)) * row_bytes;
  }

  __device__ float scale_at(const uint8_t* p) const {
    return scale_type == DType::bf16 ? bf16_at(p) : scale_type == DType::f16 ? f16_at(p) : f32_at(p);
  }

  // Values at .. at + 7 of `row` (at % 8 == 0); zeros when at >= k (k is a whole number of blocks).
  __device__ void load8(const uint8_t* row, int64_t at64, int64_t k, float (&out)[8]) const {
    // Rows are under 2^31 values: 32-bit offsets, and shifts for the power-of-two groups (a
    // 64-bit division by a group held in a register would cost more than the decode).
    const uint32_t at = uint32_t(at64);
    if (at64 >= k) {
#pragma unroll
      for (int i = 0; i < 8; ++i) out[i] = 0.0f;
      return;
    }
    if constexpr (kKind == QuantKind::q8_0) {
      const uint8_t* block = row + size_t(at / 32) * 34;
      const float d = f16_at(block);
      uint32_t words[2];
      load_words2(block + 2 + at % 32, words);
#pragma unroll
      for (int i = 0; i < 8; ++i)  // int8_t(q) * d: the sign bit flipped makes q + 128
        out[i] = __fmul_rn(small_int_of_byte<128>(words[i / 4] ^ 0x80808080u, i % 4), d);
    } else if constexpr (kKind == QuantKind::q4_0) {
      const uint8_t* block = row + size_t(at / 32) * 18;
      const float d = f16_at(block);
      const int o = int(at % 32), shift = o >= 16 ? 4 : 0;
      uint32_t words[2];
      load_words2(block + 2 + o % 16, words);
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        const uint32_t codes = (words[w] >> shift) & 0x0F0F0F0Fu;  // the block's values o .. o + 7
#pragma unroll
        for (int j = 0; j < 4; ++j) out[4 * w + j] = __fmul_rn(d, small_int_of_byte<8>(codes, j));
      }
    } else if constexpr (kKind == QuantKind::q4_1 || kKind == QuantKind::q5_0 || kKind == QuantKind::q5_1 ||
                         kKind == QuantKind::iq4_nl) {
      // Q4_0's nibbles (values 0-15 low, 16-31 high), after d (and m), after qh for Q5_0 and
      // Q5_1, whose bit j is value j's fifth.
      constexpr bool kMin = kKind == QuantKind::q4_1 || kKind == QuantKind::q5_1;
      constexpr bool kFive = kKind == QuantKind::q5_0 || kKind == QuantKind::q5_1;
      constexpr int kBytes = 18 + (kMin ? 2 : 0) + (kFive ? 4 : 0);
      const uint8_t* block = row + size_t(at / 32) * kBytes;
      const float d = f16_at(block), m = kMin ? f16_at(block + 2) : 0.0f;
      const uint8_t* qh = block + (kMin ? 4 : 2);
      const int o = int(at % 32), shift = o >= 16 ? 4 : 0;
      const uint32_t high = kFive ? uint32_t(load_u16(qh)) | uint32_t(load_u16(qh + 2)) << 16 : 0u;
      uint8_t q[8];
      load_bytes8(qh + (kFive ? 4 : 0) + o % 16, q);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint32_t code = ((q[i] >> shift) & 0xFu) | (kFive ? ((high >> (o + i)) & 1u) << 4 : 0u);
        if constexpr (kKind == QuantKind::iq4_nl) out[i] = __fmul_rn(d, float(kIq4NlDevice[code]));
        else if constexpr (kKind == QuantKind::q5_0) out[i] = __fmul_rn(d, small_int<16>(code));
        else out[i] = __fadd_rn(__fmul_rn(d, small_int<0>(code)), m);
      }
    } else if constexpr (kKind == QuantKind::q4_k || kKind == QuantKind::q5_k) {
      constexpr bool kFive = kKind == QuantKind::q5_k;
      const uint8_t* block = row + size_t(at / 256) * (kFive ? 176 : 144);
      const int o = int(at % 256), j = o / 32, l = o % 32;
      float sc, m;
      scale_min_k4(j, block + 4, sc, m);
      const float d1 = __fmul_rn(f16_at(block), sc), m1 = __fmul_rn(f16_at(block + 2), m);
      uint8_t q[8], h[8];
      load_bytes8(block + (kFive ? 48 : 16) + 32 * (j / 2) + l, q);
      if constexpr (kFive) load_bytes8(block + 16 + l, h);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        uint32_t code = (q[i] >> (4 * (j % 2))) & 0xF;
        if constexpr (kFive) code |= ((h[i] >> j) & 1u) << 4;
        out[i] = __fsub_rn(__fmul_rn(d1, small_int<0>(code)), m1);
      }
    } else if constexpr (kKind == QuantKind::q6_k) {
      const uint8_t* block = row + size_t(at / 256) * 210;
      const int o = int(at % 256), half = o / 128, r = o % 128;
      const float ds = __fmul_rn(f16_at(block + 208), float(int8_t(block[192 + o / 16])));
      uint8_t lo[8], hi[8];
      load_bytes8(block + 64 * half + r % 64, lo);
      load_bytes8(block + 128 + 32 * half + r % 32, hi);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint32_t code = ((lo[i] >> (4 * (r / 64))) & 0xFu) | (((hi[i] >> (2 * (r / 32))) & 3u) << 4);
        out[i] = __fmul_rn(ds, small_int<32>(code));
      }
    } else if constexpr (kKind == QuantKind::fp8) {
      const float scale = f32_at(row + values_bytes + (at >> group_shift) * 4);
      uint8_t q[8];
      load_bytes8(row + at, q);
#pragma unroll
      for (int i = 0; i < 8; ++i) out[i] = __fmul_rn(e4m3_value(q[i]), scale);
    } else {
      constexpr int kBits = affine_bits(kKind);
      const uint32_t size = scale_type == DType::f32 ? 4 : 2, g = at >> group_shift;
      const float scale = scale_at(row + values_bytes + g * size);
      const float bias = scale_at(row + values_bytes + scales_bytes + g * size);
      float codes[8];
      if constexpr (kBits == 3 || kBits == 5 || kBits == 6) {
        // A little-endian stream of bits: codes at .. at + 7 are the kBits bytes from byte
        // at * kBits / 8 (mlx's packs of 3 or 5 bytes), code i from bit kBits * i.
        const uint8_t* bytes = row + at / 8 * kBits;
        uint64_t stream = 0;
#pragma unroll
        for (int b = 0; b < kBits; ++b) stream |= uint64_t(bytes[b]) << (8 * b);
#pragma unroll
        for (int i = 0; i < 8; ++i) codes[i] = small_int<0>(uint32_t(stream >> (kBits * i)) & ((1u << kBits) - 1));
      } else {
        const uint32_t* words = reinterpret_cast<const uint32_t*>(row) + at / (32 / kBits);
        if constexpr (kBits == 4) {
          small_ints_of_nibbles<0>(words[0], codes);
        } else if constexpr (kBits == 8) {
#pragma unroll
          for (int i = 0; i < 8; ++i) codes[i] = small_int_of_byte<0>(words[i / 4], i % 4);
        } else {
#pragma unroll
          for (int i = 0; i < 8; ++i) codes[i] = small_int<0>((words[0] >> (2 * (int(at % 16) + i))) & 3u);
        }
      }
      // scale * code + bias. With 16-bit scales (at most 11 significant bits) times a code of at
      // most 8 bits, the product is exact in f32 (short of overflow, past any scale a quantizer
      // writes), so one fused multiply-add rounds as the product's add alone would: the same
      // bits in one instruction (QuantConversions.SixteenBitScalesTimesCodesAreExactInF32).
      if (scale_type == DType::f32) {
#pragma unroll
        for (int i = 0; i < 8; ++i) out[i] = __fadd_rn(__fmul_rn(codes[i], scale), bias);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) out[i] = __fmaf_rn(codes[i], scale, bias);
      }
    }
  }
};

// Whether `kind`'s matmuls run on the tensor cores (cuda_matmul_quant_mma.cu): every launch of
// such a weight, whatever its rows, so a row's sums are fixed by k alone.
bool quant_on_tensor_cores(QuantKind kind);
// Launches that kernel (x 16-byte aligned, k a whole number of 32-value blocks).
void launch_matmul_quant_mma(const float* x, QuantKind kind, const QuantView& view, float* out, int64_t k, int64_t m,
                             const MatmulRows& rows, Launches& launches);

// The quantized matmul of a round (cuda_matmul_quant.cu): launch_matmul's sums for launches of
// up to 16 rows a weight; false (nothing launched) for one it does not take.
bool launch_matmul_quant_rows(const float* x, QuantKind kind, const QuantView& view, float* out, int64_t k, int64_t m,
                              const MatmulRows& rows, Launches& launches);

}  // namespace lockstep::cuda
