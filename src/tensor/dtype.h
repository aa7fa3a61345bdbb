// Element types and their conversions. bf16 and f16 are stored as raw 16-bit words.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace lockstep {

// quant: a quantized weight's rows in a block format; the Tensor's `quant` says which
// (tensor/quant.h).
// u8, u32 and f8_e4m3: the parts of quantized checkpoints (packed words, e4m3 bytes), which
// only the quantized loaders read.
enum class DType : uint8_t { f32, bf16, f16, i32, i64, quant, u8, u32, f8_e4m3 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::quant: return 0;  // blocks: Tensor::bytes() counts them
    case DType::u8: return 1;
    case DType::u32: return 4;
    case DType::f8_e4m3: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t);
// The safetensors spelling ("F32", "BF16", ...); nullopt for types lockstep does not read.
std::optional<DType> dtype_from_safetensors(std::string_view name);
// The inverse of dtype_from_safetensors: "F32", "BF16", "F16", "I32", "I64".
std::string_view dtype_to_safetensors(DType t);

inline float bf16_to_f32(uint16_t bits) {
  uint32_t word = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &word, 4);
  return value;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, 4);
  if ((word & 0x7fffffffu) > 0x7f800000u) return uint16_t((word >> 16) | 0x40);
  word += 0x7fffu + ((word >> 16) & 1u);
  return uint16_t(word >> 16);
}

float f16_to_f32(uint16_t bits);

}  // namespace lockstep
