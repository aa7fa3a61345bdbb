#include "tensor/quant_gguf.h"

#include <algorithm>
#include <cmath>

#include "tensor/dtype.h"

// Each product and difference is rounded on its own, in the order gguf-py's numpy rounds them
// (for the K-quants: d * sc first, then that * q - dmin * m); -ffp-contract=off keeps it so.

namespace lockstep {
namespace {

constexpr int QK_K = 256;

float load_f16(const uint8_t* p) { return f16_to_f32(uint16_t(p[0] | p[1] << 8)); }

void store_f16(float value, uint8_t* p) {
  uint16_t half = f32_to_f16(value);
  p[0] = uint8_t(half);
  p[1] = uint8_t(half >> 8);
}

// Q8_0: d, qs[32]; y = qs * d.
void dequantize_q8_0(const uint8_t* block, float* y) {
  const float d = load_f16(block);
  const uint8_t* qs = block + 2;
  for (int i = 0; i < 32; ++i) y[i] = float(int8_t(qs[i])) * d;
}

// Q4_0: d, qs[16]; value j is the low nibble of qs[j], value j + 16 the high one, less 8.
void dequantize_q4_0(const uint8_t* block, float* y) {
  const float d = load_f16(block);
  const uint8_t* qs = block + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float((qs[j] & 0xF) - 8);
    y[j + 16] = d * float((qs[j] >> 4) - 8);
  }
}

// Q4_1: d, m, qs[16]; q as in Q4_0 without the 8; y = d * q + m.
void dequantize_q4_1(const uint8_t* block, float* y) {
  const float d = load_f16(block), m = load_f16(block + 2);
  const uint8_t* qs = block + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(qs[j] & 0xF) + m;
    y[j + 16] = d * float(qs[j] >> 4) + m;
  }
}

// Q5_0 and Q5_1: the nibbles of Q4_0, with value j's fifth bit bit j of qh (little-endian).
// Q5_0: d, qh[4], qs[16], y = d * (q - 16); Q5_1: d, m, qh[4], qs[16], y = d * q + m.
void dequantize_q5(const uint8_t* block, bool with_min, float* y) {
  const float d = load_f16(block), m = with_min ? load_f16(block + 2) : 0.0f;
  const uint8_t* qh = block + (with_min ? 4 : 2);
  const uint8_t* qs = qh + 4;
  const uint32_t high = uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
  for (int j = 0; j < 32; ++j) {
    const int low = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
    const int q = low | int((high >> j) & 1) << 4;
    y[j] = with_min ? d * float(q) + m : d * float(q - 16);
  }
}

// IQ4_NL: d, qs[16]; the nibbles index a table of 16 values, y = d * table[q].
void dequantize_iq4_nl(const uint8_t* block, float* y) {
  const float d = load_f16(block);
  const uint8_t* qs = block + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(kIq4NlValues[qs[j] & 0xF]);
    y[j + 16] = d * float(kIq4NlValues[qs[j] >> 4]);
  }
}

// Q4_K and Q5_K pack 8 six-bit scales and mins in 12 bytes: sub-blocks 0-3 in the low six bits
// of bytes 0-3 (scales) and 4-7 (mins); 4-7 in the nibbles of bytes 8-11 plus the top two bits
// of bytes 0-3 (scales) and 4-7 (mins).
void scale_min_k4(int j, const uint8_t* scales, float* sc, float* m) {
  if (j < 4) {
    *sc = float(scales[j] & 63);
    *m = float(scales[j + 4] & 63);
  } else {
    *sc = float((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *m = float((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// Q4_K and Q5_K: d, dmin, scales[12], then for Q5_K qh[32], then qs[128]; 8 sub-blocks of 32.
// Sub-blocks 2c and 2c + 1 are the low and high nibbles of qs[32c .. 32c + 31]; in Q5_K bit j of
// qh[l] is the fifth bit of value l of sub-block j. y = d * sc * q - dmin * m.
void dequantize_q45_k(const uint8_t* block, const uint8_t* qh, const uint8_t* qs, float* y) {
  const float d = load_f16(block);
  const float dmin = load_f16(block + 2);
  const uint8_t* scales = block + 4;
  for (int j = 0; j < 8; ++j) {
    float sc, m;
    scale_min_k4(j, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    const uint8_t* q = qs + 32 * (j / 2);
    for (int l = 0; l < 32; ++l) {
      const int low = (q[l] >> (4 * (j % 2))) & 0xF;
      const int high = qh ? (qh[l] >> j) & 1 : 0;
      y[32 * j + l] = d1 * float(low | high << 4) - m1;
    }
  }
}

void dequantize_q4_k(const uint8_t* block, float* y) { dequantize_q45_k(block, nullptr, block + 16, y); }

void dequantize_q5_k(const uint8_t* block, float* y) { dequantize_q45_k(block, block + 16, block + 48, y); }

// Q6_K: ql[128], qh[64], scales[16] (int8, one per 16 values), d. Each half of 128 values has
// 64 bytes of ql (value r: nibble r / 64 of byte r % 64) and 32 of qh (value r: bits 2 * (r / 32)
// of byte r % 32). y = d * scale * (q - 32).
void dequantize_q6_k(const uint8_t* block, float* y) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const uint8_t* scales = block + 192;
  const float d = load_f16(block + 208);
  for (int i = 0; i < QK_K; ++i) {
    const int half = i / 128, r = i % 128;
    int low = (ql[64 * half + r % 64] >> (4 * (r / 64))) & 0xF;
    int high = (qh[32 * half + r % 32] >> (2 * (r / 32))) & 3;
    y[i] = d * float(int8_t(scales[i / 16])) * float((low | high << 4) - 32);
  }
}

// llama.cpp's reference Q8_0: d = amax / 127, qs = roundf(x / d), half away from zero.
void quantize_q8_0(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  store_f16(d, block);
  for (int i = 0; i < 32; ++i) block[2 + i] = uint8_t(int8_t(std::round(x[i] * id)));
}

// llama.cpp's reference Q4_0: d = max / -8, with max the first value of largest magnitude,
// q = min(15, trunc(x / d + 8.5)). C's result depends on whether x * id + 8.5 is fused; gguf-py
// defines it as the sum in double, rounded to float, then truncated, and so does this.
void quantize_q4_0(const float* x, uint8_t* block) {
  float max = x[0], amax = std::fabs(x[0]);
  for (int i = 1; i < 32; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  auto code = [id](float v) {
    float shifted = float(double(v) * double(id) + 8.5);
    return std::min(15, int(std::trunc(shifted)));
  };
  store_f16(d, block);
  for (int j = 0; j < 16; ++j) block[2 + j] = uint8_t(code(x[j]) | code(x[j + 16]) << 4);
}

}  // namespace

GgufBlock gguf_block(QuantFormat format) {
  switch (format) {
    case QuantFormat::q8_0: return {32, 34};
    case QuantFormat::q4_0: return {32, 18};
    case QuantFormat::q4_1: return {32, 20};
    case QuantFormat::q5_0: return {32, 22};
    case QuantFormat::q5_1: return {32, 24};
    case QuantFormat::iq4_nl: return {32, 18};
    case QuantFormat::q4_k: return {QK_K, 144};
    case QuantFormat::q5_k: return {QK_K, 176};
    case QuantFormat::q6_k: return {QK_K, 210};
    default: return {0, 0};
  }
}

void dequantize_gguf(QuantFormat format, size_t count, const uint8_t* blocks, float* y) {
  const GgufBlock block = gguf_block(format);
  for (size_t b = 0; b < count / size_t(block.values); ++b) {
    const uint8_t* in = blocks + b * size_t(block.bytes);
    float* out = y + b * size_t(block.values);
    switch (format) {
      case QuantFormat::q8_0: dequantize_q8_0(in, out); break;
      case QuantFormat::q4_0: dequantize_q4_0(in, out); break;
      case QuantFormat::q4_1: dequantize_q4_1(in, out); break;
      case QuantFormat::q5_0: dequantize_q5(in, false, out); break;
      case QuantFormat::q5_1: dequantize_q5(in, true, out); break;
      case QuantFormat::iq4_nl: dequantize_iq4_nl(in, out); break;
      case QuantFormat::q4_k: dequantize_q4_k(in, out); break;
      case QuantFormat::q5_k: dequantize_q5_k(in, out); break;
      case QuantFormat::q6_k: dequantize_q6_k(in, out); break;
      default: break;
    }
  }
}

void quantize_gguf(QuantFormat format, size_t count, const float* x, uint8_t* blocks) {
  const GgufBlock block = gguf_block(format);
  for (size_t b = 0; b < count / size_t(block.values); ++b) {
    const float* in = x + b * size_t(block.values);
    uint8_t* out = blocks + b * size_t(block.bytes);
    if (format == QuantFormat::q8_0) quantize_q8_0(in, out);
    if (format == QuantFormat::q4_0) quantize_q4_0(in, out);
  }
}

}  // namespace lockstep
