#include "tensor/dtype.h"

namespace lockstep {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::quant: return "quant";
    case DType::u8: return "u8";
    case DType::u32: return "u32";
    case DType::f8_e4m3: return "f8_e4m3";
  }
  return "?";
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  if (name == "F32") return DType::f32;
  if (name == "BF16") return DType::bf16;
  if (name == "F16") return DType::f16;
  if (name == "I32") return DType::i32;
  if (name == "I64") return DType::i64;
  if (name == "U8") return DType::u8;
  if (name == "U32") return DType::u32;
  if (name == "F8_E4M3") return DType::f8_e4m3;
  return std::nullopt;
}

std::string_view dtype_to_safetensors(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::quant: return "?";
    case DType::u8: return "U8";
    case DType::u32: return "U32";
    case DType::f8_e4m3: return "F8_E4M3";
  }
  return "?";
}

float f16_to_f32(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t word;
  if (exponent == 0x1f) {
    word = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    word = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    word = sign;
  } else {  // subnormal: normalise the mantissa
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    word = sign | (uint32_t(113 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float value;
  std::memcpy(&value, &word, 4);
  return value;
}

}  // namespace lockstep
