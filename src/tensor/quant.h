// Quantized weight formats: GGUF's blocks (llama.cpp's ggml layouts), MLX's affine groups and
// FP8 e4m3 with f32 scales. Each dequantizes to exactly the f32 values of its reference, bit for
// bit: gguf-py's quants.py for GGUF, transformers' metal_quantization.py for MLX affine, and
// transformers' fine-grained FP8 (code * scale) for FP8. Plain scalar code: the definition the
// fast kernels are tested against, not a kernel itself. No state; every function is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"
#include "tensor/dtype.h"
#include "tensor/quant_layout.h"

namespace lockstep {

// Refuses a layout the format does not define (affine bits 7, a group of 48, ...), naming it.
[[nodiscard]] Status check_layout(const QuantLayout& layout);

// Values that share one scale: the GGUF block (32 or 256), the affine group, the FP8 block (1 for
// FP8 per tensor, whose rows may be any length). A row's length must be a multiple of it.
int block_values(const QuantLayout& layout);

// The bytes one row of `n` values takes in each part of a tensor. GGUF keeps everything in its
// blocks (`values`); affine has words, scales and biases; FP8 has codes and, per block, f32
// scales (none per row when the scale is per tensor).
struct RowBytes {
  size_t values = 0;
  size_t scales = 0;
  size_t biases = 0;
  size_t total() const { return values + scales + biases; }
};

// Fails when the layout is undefined or `n` is not a positive whole number of blocks.
[[nodiscard]] Expected<RowBytes> quant_row_bytes(const QuantLayout& layout, size_t n);

// Read-only views of whole rows, one row after another in each part, as stored (little end first;
// no alignment needed). For FP8 per tensor, `scales` is the one f32 of the tensor. A row of an
// FP8 checkpoint with 2-D scale blocks ([128, 128]) is passed alone, with its own scale row.
struct QuantRows {
  std::span<const uint8_t> values;
  std::span<const uint8_t> scales;
  std::span<const uint8_t> biases;
};

// Where quantize writes: the same parts as QuantRows.
struct QuantRowsOut {
  std::span<uint8_t> values;
  std::span<uint8_t> scales;
  std::span<uint8_t> biases;
};

// Dequantizes out.size() / n rows of `n` values each into `out` (row-major f32), exactly as the
// reference does. Refuses, writing nothing, a bad layout or length, or parts whose sizes are not
// those of that many rows.
[[nodiscard]] Status dequantize_rows(const QuantLayout& layout, size_t n, const QuantRows& rows,
                                     std::span<float> out);
// One row of out.size() values.
[[nodiscard]] Status dequantize_row(const QuantLayout& layout, const QuantRows& row,
                                    std::span<float> out);

// Quantizes x.size() / n rows of `n` values, byte for byte as the reference: Q8_0 and Q4_0 as
// gguf-py (llama.cpp's reference rounding), mlx_affine as transformers' _affine_quantize_tensor
// (which follows mlx's affine_quantize), FP8 as transformers' fine-grained FP8: per block
// s = 448 / amax (in torch, (1 / amax) * 448), code = e4m3(clamp(x * s, -448, 448)), stored
// scale = 1 / s (per tensor: one block of all rows). An all-zero FP8 block, which transformers
// turns into NaN, gets codes 0 and scale 1. K-quants are refused: gguf-py defines no quantize
// for them. Refuses, writing nothing, what dequantize_rows refuses.
[[nodiscard]] Status quantize_rows(const QuantLayout& layout, size_t n, std::span<const float> x,
                                   const QuantRowsOut& out);

// The element conversions the formats use.
// f32 to IEEE half, round to nearest even (numpy's astype(float16), C's (_Float16)).
uint16_t f32_to_f16(float value);
// e4m3 "fn" (no infinities; 0x7f and 0xff are NaN; largest finite 448) to f32, exact.
float e4m3_to_f32(uint8_t code);
// f32 to e4m3, round to nearest even, saturating at +-448 (infinities too); NaN gives 0x7f.
uint8_t f32_to_e4m3(float value);

}  // namespace lockstep
