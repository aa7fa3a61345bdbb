// GGUF's block formats, one block at a time, for quant.cpp (use quant.h, which checks sizes).
// The field names are ggml's: d and dmin (f16 super-scales), scales, qs (low bits), qh (high
// bits), ql (Q6_K's low bits).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/quant.h"

namespace lockstep {

struct GgufBlock {
  int values;  // 32 or 256
  int bytes;   // 18 to 34, or 144, 176 or 210
};

// The block of a GGUF format (q8_0 ... q6_k).
GgufBlock gguf_block(QuantFormat format);

// `count` values (whole blocks) from their blocks, as gguf-py's dequantize.
void dequantize_gguf(QuantFormat format, size_t count, const uint8_t* blocks, float* y);

// `count` values (whole blocks) into blocks, as gguf-py's quantize: q8_0 and q4_0 only.
void quantize_gguf(QuantFormat format, size_t count, const float* x, uint8_t* blocks);

}  // namespace lockstep
