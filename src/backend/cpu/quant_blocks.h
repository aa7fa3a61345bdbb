// What the fused quantized kernels (matmul_quant_avx2.cpp, matmul_quant_avx512.cpp) share: where
// each format keeps the scales of pair j (the 32 values at k offsets 32 * j to 32 * j + 31) of
// a stored row, computed with the format's own operations (tensor/quant.h), the prefetches, and
// the choice of a decoder per format, for a pass of few rows or for one
// row dequantized into the scratch of a wider pass. Each kernel file brings its own vector
// decoders, tile and row store. Include only from files compiled with F16C (every ISA file is).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/matmul.h"
#include "tensor/dtype.h"

namespace lockstep::cpu::quant_blocks {

// Passes of more rows dequantize once into scratch and reuse it (matmul_quant.cpp).
constexpr int64_t kMaxFusedRows = 8;

inline uint16_t load_u16(const std::byte* at) {
  uint16_t value;
  std::memcpy(&value, at, 2);
  return value;
}

// f16 to f32 (exact) with the F16C instruction.
inline float half(uint16_t bits) { return _cvtsh_ss(bits); }

inline float load_scale(DType type, const std::byte* at) {
  if (type == DType::f32) {
    float value;
    std::memcpy(&value, at, 4);
    return value;
  }
  return type == DType::bf16 ? bf16_to_f32(load_u16(at)) : half(load_u16(at));
}

// Q4_K and Q5_K: pair j is sub-block j % 8 of block j / 8, whose 32 values are scale * float(q)
// - min, with scale = d * sc and min = dmin * m (quant_gguf.cpp's order). A block's 8 scales
// and mins, each exactly that float, are made at once: the 6-bit codes unpacked from the 12
// bytes as words (bytes 0 to 3 are sub-blocks 0 to 3; 4 to 7 take 4 bits from the last word and
// their top 2 from the high bits of the first two), then converted and multiplied in vectors.
struct KBlockScales {
  alignas(32) float scale[8];
  alignas(32) float min[8];
};

inline void k_block_scales(const std::byte* block, KBlockScales& out) {
  uint32_t a, b, c;
  std::memcpy(&a, block + 4, 4);
  std::memcpy(&b, block + 8, 4);
  std::memcpy(&c, block + 12, 4);
  constexpr uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
  const uint64_t sc = uint64_t(a & low6) | uint64_t((c & low4) | ((a >> 6) & low2) << 4) << 32;
  const uint64_t m = uint64_t(b & low6) | uint64_t(((c >> 4) & low4) | ((b >> 6) & low2) << 4) << 32;
  auto floats = [](uint64_t bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(bytes)))); };
  _mm256_store_ps(out.scale, _mm256_mul_ps(_mm256_set1_ps(half(load_u16(block))), floats(sc)));
  _mm256_store_ps(out.min, _mm256_mul_ps(_mm256_set1_ps(half(load_u16(block + 2))), floats(m)));
}

// Q6_K: pair j holds values 32 * (j % 8) to + 31 of block j / 8, each 16 with an int8 scale:
// d * scale * float(q - 32), q from 4 bits of ql (shifted by low_shift) and 2 of qh (by
// high_shift). Where sub-block `sub`'s (pair j % 8's) codes are:
struct Q6KCodes {
  const std::byte* ql;
  const std::byte* qh;
  int low_shift;
  int high_shift;
};

inline Q6KCodes q6k_codes(const std::byte* block, int sub) {
  const int first = 32 * sub, half_at = first / 128, r = first % 128;  // its 128-value half, where in it
  return {block + 64 * half_at + r % 64, block + 128 + 32 * half_at, 4 * (r / 64), 2 * (r / 32)};
}

// Pair j's codes and its two scales.
struct Q6KPair : Q6KCodes {
  float scale0;  // the first 16 values'
  float scale1;  // the last 16's
};

inline Q6KPair q6k_pair(const std::byte* row, int64_t j) {
  const std::byte* block = row + (j / 8) * 210;
  const int sub = int(j % 8);
  const float d = half(load_u16(block + 208));
  const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
  return {q6k_codes(block, sub), d * float(scales[2 * sub]), d * float(scales[2 * sub + 1])};
}

// MLX affine, 4 or 8 bits: the words, then a scale and a bias per group.
struct AffineLayout {
  int bits;
  int pairs_shift;  // log2 of the pairs of 32 values a group holds (groups of 32 to 128)
  DType scale_type;
  size_t scales_at;  // bytes from the row's start to its scales
  size_t biases_at;
};

// log2(group / 32) for groups of 32, 64 or 128 values (one scale for each pair of 32 the decoders
// take: a shift, not a division, a pair), else -1: those take the dequantized scratch.
inline int pairs_shift_of(int group) {
  for (int shift = 0; shift <= 2; ++shift)
    if (group == 32 << shift) return shift;
  return -1;
}

// In tiles of neighbouring columns (passes of more than one row) the next tile's rows, contiguous
// after this tile's, are asked for into L2 a few lines a step,
// spread over the tile's steps: the core's own prefetchers stop at each 4 KB page, and without
// this the decoding waits on memory instead of overlapping it (measured on AVX-512: one thread
// over 570 MB of q8_0 rows, 5.75 G weights/s without, 7.63 with). The same number of lines each
// step, fixed once a tile: no division a step (a first Zen core's divider, two divisions a step,
// cost more than the decoding). A prefetch past the weight's end is a hint, never a fault.
class NextTilePrefetch {
 public:
  NextTilePrefetch(const std::byte* next_rows, size_t bytes, int64_t steps)
      : next_(reinterpret_cast<const char*>(next_rows)),
        lines_(int64_t((bytes + 63) / 64)),
        per_step_((lines_ + steps - 1) / steps) {}
  void step(int64_t j) const {
    const int64_t end = std::min(lines_, (j + 1) * per_step_);
    for (int64_t line = j * per_step_; line < end; ++line) _mm_prefetch(next_ + line * 64, _MM_HINT_T1);
  }

 private:
  const char* next_;
  int64_t lines_;
  int64_t per_step_;
};

// One-row passes take their columns spaced apart (spaced_column_tiles), so each column's codes
// run on from its last row and the core's prefetchers follow them, with no prefetch of ours
// (measured on a 2-core Zen 5, q8_0, one row: [4096, 4096] 0.49 -> 0.34 ms, [14336, 4096] 2.10
// -> 1.11). Not where decoding takes longer than reading: at 2 to 8 rows spaced tiles were 1.0x
// to 1.2x slower than neighbouring ones with the prefetch above, and for formats whose scales
// sit after the row's codes (MLX affine, FP8: their decoders set kScalesAfterCodes), 1.1x to
// 1.5x slower at one row too. Those keep neighbouring columns.
template <class Decode>
constexpr bool spaced_one_row_tiles = !requires { Decode::kScalesAfterCodes; };

// What a decoder keeps from pair to pair of one row (its State, refreshed at a group's first
// pair), or nothing: pairs are decoded in order from the row's first, one state a row.
struct NoState {};
template <class Decode>
struct StateType {
  using type = NoState;
};
template <class Decode>
  requires requires { typename Decode::State; }
struct StateType<Decode> {
  using type = typename Decode::State;
};
template <class Decode>
using StateOf = typename StateType<Decode>::type;

// Calls use(decoder) with `Isa`'s decoder for rows of k values in `layout` (Isa::Q8_0, Q4_0,
// Block32<F>, Q4K, Q5K, Q6K, Affine<bits, scale type>{AffineLayout} or Fp8{pairs shift, k}; for
// codes in CodeOrder::halves, AffineHalves<scale type>, where Isa has it); false, calling
// nothing, for a layout it has none for or a k that is not whole pairs.
template <class Isa, class Use>
bool with_decoder(const QuantLayout& layout, CodeOrder order, int64_t k, Use&& use) {
  if (k % 32 != 0) return false;
  // Codes in halves order are MLX affine 4-bit ones (split_nibbles) alone.
  if (order == CodeOrder::halves && (layout.format != QuantFormat::mlx_affine || layout.bits != 4)) return false;
  switch (layout.format) {
    case QuantFormat::q8_0: use(typename Isa::Q8_0{}); return true;
    case QuantFormat::q4_0: use(typename Isa::Q4_0{}); return true;
    case QuantFormat::q4_1: use(typename Isa::template Block32<QuantFormat::q4_1>{}); return true;
    case QuantFormat::q5_0: use(typename Isa::template Block32<QuantFormat::q5_0>{}); return true;
    case QuantFormat::q5_1: use(typename Isa::template Block32<QuantFormat::q5_1>{}); return true;
    case QuantFormat::iq4_nl: use(typename Isa::template Block32<QuantFormat::iq4_nl>{}); return true;
    case QuantFormat::q4_k: use(typename Isa::Q4K{}); return true;
    case QuantFormat::q5_k: use(typename Isa::Q5K{}); return true;
    case QuantFormat::q6_k: use(typename Isa::Q6K{}); return true;
    case QuantFormat::mlx_affine: {
      const int shift = pairs_shift_of(layout.group);
      if ((layout.bits != 4 && layout.bits != 8) || shift < 0) return false;
      const size_t scales_at = size_t(k) * size_t(layout.bits) / 8;
      const size_t biases_at = scales_at + size_t(k / layout.group) * dtype_size(layout.scale_type);
      const AffineLayout affine{layout.bits, shift, layout.scale_type, scales_at, biases_at};
      // The width, the scales' type and the codes' order are the decoder's type (no branch on
      // them a pair); halves order where Isa has its decoder.
      auto with_scale = [&]<int kBits, DType kScale>() {
        if (order == CodeOrder::stored) {
          use(typename Isa::template Affine<kBits, kScale>{affine});
          return true;
        }
        if constexpr (requires { typename Isa::template AffineHalves<kScale>; }) {
          use(typename Isa::template AffineHalves<kScale>{affine});
          return true;
        }
        return false;
      };
      auto with_width = [&]<int kBits>() {
        switch (layout.scale_type) {
          case DType::bf16: return with_scale.template operator()<kBits, DType::bf16>();
          case DType::f16: return with_scale.template operator()<kBits, DType::f16>();
          case DType::f32: return with_scale.template operator()<kBits, DType::f32>();
          default: return false;
        }
      };
      return layout.bits == 4 ? with_width.template operator()<4>() : with_width.template operator()<8>();
    }
    case QuantFormat::fp8_e4m3: {
      // (per-tensor scales are stored per block: io/quantized_weights.cpp)
      const int shift = pairs_shift_of(layout.group);
      if (shift < 0) return false;
      use(typename Isa::Fp8{shift, k});
      return true;
    }
    default: return false;
  }
}

// The pass through `Isa`'s fused kernel, Isa::fused(args, decoder, row_bytes, col_begin,
// col_end); false for a pass or layout it does not take.
template <class Isa>
bool fused_pass(const MatmulArgs& a, const QuantLayout& layout, CodeOrder order, int64_t col_begin,
                int64_t col_end) {
  if (a.n > kMaxFusedRows) return false;
  const size_t row_bytes = quant_row_total(layout, a.k);
  return with_decoder<Isa>(layout, order, a.k,
                           [&](const auto& decode) { Isa::fused(a, decode, row_bytes, col_begin, col_end); });
}

// One stored row's k values into out through `Isa`'s decoder, Isa::dequantize(decoder, row,
// k, out): exactly dequantize_stored_row's floats; false for a layout it does not take.
template <class Isa>
bool dequantize_pass(const QuantLayout& layout, CodeOrder order, const std::byte* row, int64_t k, float* out) {
  return with_decoder<Isa>(layout, order, k, [&](const auto& decode) { Isa::dequantize(decode, row, k, out); });
}

}  // namespace lockstep::cpu::quant_blocks
