// How a Tensor of DType::quant holds a quantized weight: each row of the last dimension is its
// parts one after another (quant.h's RowBytes: the values, then the scales, then the biases), so
// a row, a slice of rows or one expert of a stack is one contiguous piece of memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/quant.h"

namespace lockstep {

// The n values of one stored row, exactly as quant.h's dequantize_row gives them. The layout and
// length must be ones quant_row_total accepts.
void dequantize_stored_row(const QuantLayout& layout, const std::byte* row, int64_t n, float* out);

// Quantizes n values into one stored row (quant.h's quantize_rows); fails as it does.
[[nodiscard]] Status quantize_stored_row(const QuantLayout& layout, const float* x, int64_t n, std::byte* row);

// The layout a matrix whose rows hold k values takes under `--quantize` to `layout`: `layout`
// itself when k is whole blocks of it; for MLX affine and FP8, whose groups are a choice, the
// largest group of 64 or 32 values that k is whole groups of; else nullopt (GGUF blocks are fixed).
std::optional<QuantLayout> layout_for_rows(const QuantLayout& layout, int64_t k);

}  // namespace lockstep
