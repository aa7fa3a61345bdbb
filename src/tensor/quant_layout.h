// The quantized formats' names and layouts (the rest is in quant.h), apart so that tensor.h,
// which the CUDA code includes as C++17, can hold a layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tensor/dtype.h"

namespace lockstep {

enum class QuantFormat : uint8_t {
  q8_0,        // GGUF: 32 values a block of 34 bytes: f16 d, int8 qs[32]
  q4_0,        // GGUF: 32 values a block of 18 bytes: f16 d, qs[16] (two 4-bit values a byte)
  q4_k,        // GGUF: 256 values a block of 144 bytes: f16 d, dmin, scales[12], qs[128]
  q5_k,        // GGUF: 256 values a block of 176 bytes: f16 d, dmin, scales[12], qh[32], qs[128]
  q6_k,        // GGUF: 256 values a block of 210 bytes: ql[128], qh[64], int8 scales[16], f16 d
  mlx_affine,  // `bits`-bit codes (a little-endian stream of bits), a scale and a bias per group: scale * q + bias
  fp8_e4m3,    // one e4m3 byte a value, an f32 scale per block of the row or per tensor
  // GGUF's other blocks of 32 (llama.cpp writes Q5_0, Q5_1 and IQ4_NL in place of Q4_K, Q5_K
  // and the 2- and 3-bit K-quants for rows that are not whole blocks of 256, as Nemotron 3
  // Nano's 2688 and 1856 are):
  q4_1,    // 20 bytes: f16 d, f16 m, qs[16]; d * q + m, q the nibbles as in q4_0
  q5_0,    // 22 bytes: f16 d, qh[4], qs[16]; d * (q - 16), q's fifth bit j of little-endian qh
  q5_1,    // 24 bytes: f16 d, f16 m, qh[4], qs[16]; d * q + m
  iq4_nl,  // 18 bytes: f16 d, qs[16]; d * table[q], the table of 16 non-linear values
};

// IQ4_NL's 16 values, which its 4-bit codes index (the format's definition).
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

std::string_view quant_format_name(QuantFormat format);

// What a tensor of one format looks like. GGUF formats need only `format`: their blocks are fixed.
struct QuantLayout {
  QuantFormat format = QuantFormat::q8_0;
  // mlx_affine: values per scale and bias (32, 64 or 128). fp8_e4m3: values per scale (32, 64 or
  // 128), or 0 for one scale for the whole tensor.
  int group = 0;
  int bits = 0;  // mlx_affine: 2, 3, 4, 5, 6 or 8 bits a value
  // mlx_affine: the type of scales and biases (bf16 or f16; f32 also read). fp8_e4m3: f32 only.
  DType scale_type = DType::f32;

  bool operator==(const QuantLayout& other) const {
    return format == other.format && group == other.group && bits == other.bits && scale_type == other.scale_type;
  }
};

// The layouts `--quantize NAME` names: q8_0, q4_0 (GGUF's blocks of 32), q4 (MLX affine 4-bit,
// a bf16 scale and bias per 64 values), fp8 (e4m3, an f32 scale per 128 values); and for the
// benchmarks' dummy weights only (no quantizer makes them), q4_k, q5_k and q6_k; nullopt for any
// other name. (quant_tensor.cpp)
std::optional<QuantLayout> quant_layout_named(std::string_view name);

// Bytes of one row of n values as a Tensor of DType::quant stores it: its parts (quant.h's
// RowBytes) one after another. 0 for a layout or length quant.h refuses. (quant_tensor.cpp)
size_t quant_row_total(const QuantLayout& layout, int64_t n);

// "q8_0", "q4_k", "mlx_affine 4-bit, groups of 64, bf16 scales", "fp8_e4m3, an f32 scale per 128".
std::string quant_layout_name(const QuantLayout& layout);

}  // namespace lockstep
