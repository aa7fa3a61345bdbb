#include "tensor/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "tensor/quant_gguf.h"

// Every product and sum here is rounded on its own, as numpy and torch round them: the build
// compiles this file with -ffp-contract=off, so no multiply-add is fused (CMakeLists.txt).

namespace lockstep {
namespace {

bool is_gguf(QuantFormat format) {
  return format != QuantFormat::mlx_affine && format != QuantFormat::fp8_e4m3;
}

std::string name_of(const QuantLayout& layout) { return std::string(quant_format_name(layout.format)); }

// Little end first, byte by byte: checkpoint memory need not be aligned.
uint32_t load_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

void store_u32(uint32_t word, uint8_t* p) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(word >> (8 * i));
}

float load_scale(DType type, const uint8_t* p) {
  if (type == DType::f32) {
    uint32_t word = load_u32(p);
    float value;
    std::memcpy(&value, &word, 4);
    return value;
  }
  uint16_t half = uint16_t(p[0] | p[1] << 8);
  return type == DType::bf16 ? bf16_to_f32(half) : f16_to_f32(half);
}

void store_scale(DType type, float value, uint8_t* p) {
  if (type == DType::f32) {
    uint32_t word;
    std::memcpy(&word, &value, 4);
    store_u32(word, p);
    return;
  }
  uint16_t half = type == DType::bf16 ? f32_to_bf16(value) : f32_to_f16(value);
  p[0] = uint8_t(half);
  p[1] = uint8_t(half >> 8);
}

// MLX affine: code i of a row is bits [bits * i, bits * i + bits) of its values read as one
// little-endian stream of bits. mlx packs 2, 4 and 8 bits into words, 3 and 6 bits into packs
// of 3 bytes and 5 bits into packs of 5, each from its low bits: that one stream in every case.
uint32_t affine_code(const uint8_t* values, size_t i, int bits) {
  const size_t bit = i * size_t(bits);
  uint32_t two = values[bit / 8];
  if (bit % 8 + size_t(bits) > 8) two |= uint32_t(values[bit / 8 + 1]) << 8;
  return (two >> (bit % 8)) & ((1u << bits) - 1);
}

void put_affine_code(uint8_t* values, size_t i, int bits, uint32_t code) {
  const size_t bit = i * size_t(bits);
  values[bit / 8] |= uint8_t(code << (bit % 8));
  if (bit % 8 + size_t(bits) > 8) values[bit / 8 + 1] |= uint8_t(code >> (8 - bit % 8));
}

void dequantize_affine(const QuantLayout& layout, size_t count, const QuantRows& in, float* y) {
  const size_t scale_size = dtype_size(layout.scale_type);
  for (size_t i = 0; i < count; ++i) {
    size_t g = i / size_t(layout.group);
    float scale = load_scale(layout.scale_type, in.scales.data() + g * scale_size);
    float bias = load_scale(layout.scale_type, in.biases.data() + g * scale_size);
    y[i] = float(affine_code(in.values.data(), i, layout.bits)) * scale + bias;
  }
}

// torch's t.sign() * (t.abs() + 0.5).floor(), step for step: std::round differs where
// |t| + 0.5 rounds up to a whole number (0.49999997 gives 1 here).
float round_half_away(float t) {
  float sign = t > 0 ? 1.0f : (t < 0 ? -1.0f : 0.0f);
  return sign * std::floor(std::fabs(t) + 0.5f);
}

// transformers' _affine_quantize_tensor for one group: the edge of larger magnitude lands
// exactly on a code, and the scale is negative when that edge is the max.
void quantize_affine_group(const QuantLayout& layout, const float* x, uint32_t* codes, float* scale_out,
                           float* bias_out) {
  const float max_code = float((1 << layout.bits) - 1);
  float w_min = x[0], w_max = x[0];
  for (int k = 1; k < layout.group; ++k) {
    w_min = std::min(w_min, x[k]);
    w_max = std::max(w_max, x[k]);
  }
  w_max = std::max(w_max, 0.0f);  // mlx starts its running max at 0
  float scale = std::max((w_max - w_min) / max_code, 1e-7f);
  bool side = std::fabs(w_min) > std::fabs(w_max);
  if (!side) scale = -scale;
  float edge = side ? w_min : w_max;
  float q0 = round_half_away(edge / scale);
  float bias = 0.0f;
  if (q0 != 0) {
    scale = edge / q0;
    bias = edge;
  }
  for (int k = 0; k < layout.group; ++k) {
    float q = std::clamp(round_half_away((x[k] - bias) / scale), 0.0f, max_code);
    codes[k] = uint32_t(q);
  }
  *scale_out = scale;
  *bias_out = bias;
}

void quantize_affine(const QuantLayout& layout, size_t count, const float* x, const QuantRowsOut& out) {
  const size_t scale_size = dtype_size(layout.scale_type), group = size_t(layout.group);
  uint32_t codes[128];
  for (size_t g = 0; g < count / group; ++g) {
    float scale, bias;
    quantize_affine_group(layout, x + g * group, codes, &scale, &bias);
    store_scale(layout.scale_type, scale, out.scales.data() + g * scale_size);
    store_scale(layout.scale_type, bias, out.biases.data() + g * scale_size);
    // A group is whole bytes (groups of 32 or more values): cleared, then its codes put in.
    uint8_t* values = out.values.data();
    std::fill(values + g * group * layout.bits / 8, values + (g + 1) * group * layout.bits / 8, uint8_t(0));
    for (size_t k = 0; k < group; ++k) put_affine_code(values, g * group + k, layout.bits, codes[k]);
  }
}

// FP8: code * scale, one scale per block of `group` values, or one for all (group 0).
void dequantize_fp8(const QuantLayout& layout, size_t count, const QuantRows& in, float* y) {
  for (size_t i = 0; i < count; ++i) {
    size_t block = layout.group == 0 ? 0 : i / size_t(layout.group);
    y[i] = e4m3_to_f32(in.values[i]) * load_scale(DType::f32, in.scales.data() + 4 * block);
  }
}

void quantize_fp8(const QuantLayout& layout, size_t count, const float* x, const QuantRowsOut& out) {
  const size_t block = layout.group == 0 ? count : size_t(layout.group);
  for (size_t first = 0; first < count; first += block) {
    float amax = 0.0f;
    for (size_t i = first; i < first + block; ++i) amax = std::max(amax, std::fabs(x[i]));
    // transformers writes s = 448 / amax, which torch computes as amax.reciprocal() * 448.
    float s = amax > 0 ? (1.0f / amax) * 448.0f : 1.0f;
    for (size_t i = first; i < first + block; ++i) out.values[i] = f32_to_e4m3(std::clamp(x[i] * s, -448.0f, 448.0f));
    store_scale(DType::f32, 1.0f / s, out.scales.data() + 4 * (first / block));
  }
}

// The part sizes that `rows` rows of `bytes` need; FP8 per tensor has its one scale.
Status check_parts(const QuantLayout& layout, size_t n, size_t rows, const RowBytes& bytes, size_t values,
                   size_t scales, size_t biases) {
  bool per_tensor = layout.format == QuantFormat::fp8_e4m3 && layout.group == 0;
  struct Part {
    const char* name;
    size_t has, needs;
  } parts[] = {{"values", values, rows * bytes.values},
               {"scales", scales, per_tensor ? 4 : rows * bytes.scales},
               {"biases", biases, rows * bytes.biases}};
  const std::string these_rows = rows == 1 ? "1 row of " + std::to_string(n) + " values needs "
                                             : std::to_string(rows) + " rows of " + std::to_string(n) + " values need ";
  for (const Part& part : parts) {
    if (part.has != part.needs)
      return make_error(name_of(layout) + ": " + part.name + " hold " + std::to_string(part.has) + " bytes, but " +
                        these_rows + std::to_string(part.needs));
  }
  return Status::success();
}

Expected<size_t> row_count(const QuantLayout& layout, size_t n, size_t floats) {
  if (n == 0 || floats % n != 0)
    return make_error(name_of(layout) + ": " + std::to_string(floats) + " values are not whole rows of " +
                      std::to_string(n));
  return floats / n;
}

}  // namespace

std::string_view quant_format_name(QuantFormat format) {
  switch (format) {
    case QuantFormat::q8_0: return "q8_0";
    case QuantFormat::q4_0: return "q4_0";
    case QuantFormat::q4_1: return "q4_1";
    case QuantFormat::q5_0: return "q5_0";
    case QuantFormat::q5_1: return "q5_1";
    case QuantFormat::iq4_nl: return "iq4_nl";
    case QuantFormat::q4_k: return "q4_k";
    case QuantFormat::q5_k: return "q5_k";
    case QuantFormat::q6_k: return "q6_k";
    case QuantFormat::mlx_affine: return "mlx_affine";
    case QuantFormat::fp8_e4m3: return "fp8_e4m3";
  }
  return "?";
}

Status check_layout(const QuantLayout& layout) {
  const std::string name = name_of(layout);
  if (layout.format == QuantFormat::mlx_affine) {
    if (layout.bits < 2 || layout.bits > 8 || layout.bits == 7)
      return make_error(name + ": " + std::to_string(layout.bits) +
                        " bits a value is not read (2, 3, 4, 5, 6 or 8 are)");
    if (layout.group != 32 && layout.group != 64 && layout.group != 128)
      return make_error(name + ": a group of " + std::to_string(layout.group) + " is not read (32, 64 or 128 are)");
    if (layout.scale_type != DType::bf16 && layout.scale_type != DType::f16 && layout.scale_type != DType::f32)
      return make_error(name + ": scales of type " + std::string(dtype_name(layout.scale_type)) +
                        " are not read (bf16, f16 or f32 are)");
  } else if (layout.format == QuantFormat::fp8_e4m3) {
    if (layout.group != 0 && layout.group != 32 && layout.group != 64 && layout.group != 128)
      return make_error(name + ": a scale block of " + std::to_string(layout.group) +
                        " is not read (32, 64, 128, or 0 for one scale a tensor)");
    if (layout.scale_type != DType::f32)
      return make_error(name + ": scales of type " + std::string(dtype_name(layout.scale_type)) +
                        " are not read (f32 is)");
  }
  return Status::success();
}

int block_values(const QuantLayout& layout) {
  if (is_gguf(layout.format)) return gguf_block(layout.format).values;
  if (layout.format == QuantFormat::fp8_e4m3 && layout.group == 0) return 1;
  return layout.group;
}

Expected<RowBytes> quant_row_bytes(const QuantLayout& layout, size_t n) {
  LOCKSTEP_TRY(check_layout(layout));
  const size_t block = size_t(block_values(layout));
  if (n == 0 || n % block != 0)
    return make_error(name_of(layout) + ": a row of " + std::to_string(n) +
                      " values is not a whole number of blocks of " + std::to_string(block));
  RowBytes bytes;
  if (is_gguf(layout.format)) {
    bytes.values = n / block * size_t(gguf_block(layout.format).bytes);
  } else if (layout.format == QuantFormat::mlx_affine) {
    bytes.values = n * size_t(layout.bits) / 8;
    bytes.scales = bytes.biases = n / block * dtype_size(layout.scale_type);
  } else {
    bytes.values = n;
    bytes.scales = layout.group == 0 ? 0 : n / block * 4;
  }
  return bytes;
}

Status dequantize_rows(const QuantLayout& layout, size_t n, const QuantRows& rows, std::span<float> out) {
  Expected<RowBytes> bytes = quant_row_bytes(layout, n);
  LOCKSTEP_TRY(bytes);
  Expected<size_t> count = row_count(layout, n, out.size());
  LOCKSTEP_TRY(count);
  LOCKSTEP_TRY(check_parts(layout, n, *count, *bytes, rows.values.size(), rows.scales.size(), rows.biases.size()));
  // Blocks never straddle rows, so the rows are one run of blocks in each part.
  if (is_gguf(layout.format)) {
    dequantize_gguf(layout.format, out.size(), rows.values.data(), out.data());
  } else if (layout.format == QuantFormat::mlx_affine) {
    dequantize_affine(layout, out.size(), rows, out.data());
  } else {
    dequantize_fp8(layout, out.size(), rows, out.data());
  }
  return Status::success();
}

Status dequantize_row(const QuantLayout& layout, const QuantRows& row, std::span<float> out) {
  return dequantize_rows(layout, out.size(), row, out);
}

Status quantize_rows(const QuantLayout& layout, size_t n, std::span<const float> x, const QuantRowsOut& out) {
  if (layout.format != QuantFormat::q8_0 && layout.format != QuantFormat::q4_0 && is_gguf(layout.format))
    return make_error(name_of(layout) + ": quantize is not defined (gguf-py has no reference for it)");
  Expected<RowBytes> bytes = quant_row_bytes(layout, n);
  LOCKSTEP_TRY(bytes);
  Expected<size_t> count = row_count(layout, n, x.size());
  LOCKSTEP_TRY(count);
  LOCKSTEP_TRY(check_parts(layout, n, *count, *bytes, out.values.size(), out.scales.size(), out.biases.size()));
  if (is_gguf(layout.format)) {
    quantize_gguf(layout.format, x.size(), x.data(), out.values.data());
  } else if (layout.format == QuantFormat::mlx_affine) {
    quantize_affine(layout, x.size(), x.data(), out);
  } else {
    quantize_fp8(layout, x.size(), x.data(), out);
  }
  return Status::success();
}

uint16_t f32_to_f16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, 4);
  const uint16_t sign = uint16_t((word >> 16) & 0x8000u);
  uint32_t magnitude = word & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN stays NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // from 65520 up, rounds to infinity
  if (magnitude < 0x38800000u) {                        // below 2^-14: steps of 2^-24
    // The product is exact; 1024 steps is the smallest normal, whose code is 0x400.
    return sign | uint16_t(std::nearbyint(std::fabs(value) * 16777216.0f));
  }
  magnitude -= 112u << 23;  // exponent bias 127 to 15
  magnitude += 0xfffu + ((magnitude >> 13) & 1u);
  return sign | uint16_t(magnitude >> 13);
}

float e4m3_to_f32(uint8_t code) {
  const int exponent = (code >> 3) & 15;
  const int mantissa = code & 7;
  float magnitude;
  if (exponent == 15 && mantissa == 7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(float(mantissa), -9);
  } else {
    magnitude = std::ldexp(float(8 + mantissa), exponent - 10);
  }
  return (code & 0x80) ? -magnitude : magnitude;
}

uint8_t f32_to_e4m3(float value) {
  uint32_t word;
  std::memcpy(&word, &value, 4);
  const uint8_t sign = uint8_t((word >> 24) & 0x80u);
  uint32_t magnitude = word & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0x7f;             // NaN
  if (magnitude >= 0x43e00000u) return sign | 0x7e;     // 448 and above saturate
  if (magnitude < 0x3c800000u) {                        // below 2^-6: steps of 2^-9
    return sign | uint8_t(std::nearbyint(std::fabs(value) * 512.0f));
  }
  magnitude -= 120u << 23;  // exponent bias 127 to 7
  magnitude += 0x7ffffu + ((magnitude >> 20) & 1u);
  return sign | uint8_t(magnitude >> 20);
}

}  // namespace lockstep
