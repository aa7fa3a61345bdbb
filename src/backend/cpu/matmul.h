// CPU matmul kernels, one set per instruction set, chosen once at run time.
//
// Every output element out[r][c] = dot(x[r], w[c]) is computed the same way in every kernel
// call of one set: lane-wise fused multiply-adds over k in order, then one fixed horizontal
// sum. Tiling over rows and columns only decides which elements share registers, never the
// order of one element's sum, so a row's result does not depend on how many rows came with it.
#pragma once

#include <cstdint>
#include <string_view>

#include "tensor/quant_tensor.h"

namespace lockstep::cpu {

struct MatmulArgs {
  const float* x;  // [n, k]
  const void* w;   // [m, k], f32 or bf16 words (or rows of blocks: matmul_quantized)
  float* out;      // [n, m]
  int64_t n;
  int64_t k;
  int64_t m;
};

// Computes out columns [col_begin, col_end) for every row.
using MatmulFn = void (*)(const MatmulArgs& args, int64_t col_begin, int64_t col_end);

// Where a weight's codes sit. `stored`: as the format lays them out. `halves`: MLX affine
// 4-bit codes that CpuBackend::prepare_matmul_weight rearranged (split_nibbles), each 16 bytes
// of a row's codes holding the first 16 of their 32 values in the low nibbles and the last 16 in
// the high ones, as Q4_0's blocks do, where the stored order has values 2i and 2i + 1 in byte i:
// a decoder then widens the 16 bytes once for both halves (the AVX-512 set: 1.1x to 1.2x the
// stored order's rate from cache, README "Session 48"). The values, and so every sum, are the same.
enum class CodeOrder : uint8_t { stored, halves };

// Computes out columns [col_begin, col_end) straight from a weight stored in `layout` (its
// codes in `order`), with exactly the bits of the set's f32 kernel on the dequantized weight;
// false (writing nothing) for a layout or pass it does not take.
using QuantMatmulFn = bool (*)(const MatmulArgs& args, const QuantLayout& layout, CodeOrder order, int64_t col_begin,
                               int64_t col_end);

// Writes the k values of one stored row in `layout` (codes in `order`) into out, exactly
// dequantize_stored_row's of the stored row; false (writing nothing) for a layout it does not take.
using QuantRowFn = bool (*)(const QuantLayout& layout, CodeOrder order, const std::byte* row, int64_t k, float* out);

struct MatmulKernels {
  const char* isa;
  MatmulFn f32;
  MatmulFn bf16;
  QuantMatmulFn quant = nullptr;  // null: every quantized matmul dequantizes into scratch
  QuantRowFn dequantize = nullptr;  // null: the scratch takes dequantize_stored_row's rows
  bool halves = false;  // quant and dequantize take MLX affine 4-bit codes in CodeOrder::halves
};

MatmulKernels matmul_kernels_generic();
MatmulKernels matmul_kernels_avx2();
MatmulKernels matmul_kernels_avx512();
QuantMatmulFn quant_matmul_avx2();    // matmul_quant_avx2.cpp
QuantRowFn quant_row_avx2();
QuantMatmulFn quant_matmul_avx512();  // matmul_quant_avx512.cpp
QuantRowFn quant_row_avx512();

// The widest set this CPU runs, no wider than `limit` ("generic", "avx2", "avx512"; empty:
// no limit).
MatmulKernels select_matmul_kernels(std::string_view limit);

// Computes out columns [col_begin, col_end) for a weight stored in `layout` (Tensor::quant):
// the set's quant kernel where it takes the pass, else its f32 kernel over a few weight rows
// at a time, dequantized by the set's row decoder where it has one; either way exactly the bits the f32 kernel gives on the dequantized
// weight (matmul_quant.cpp).
void matmul_quantized(const MatmulKernels& kernels, const MatmulArgs& args, const QuantLayout& layout,
                      CodeOrder order, int64_t col_begin, int64_t col_end);

// Whether `kernels` would take a weight of `layout` with rows of k values in CodeOrder::halves.
bool takes_halves(const MatmulKernels& kernels, const QuantLayout& layout, int64_t k);
// Rearranges `rows` stored rows of k values at `data` (MLX affine 4-bit) into CodeOrder::halves.
void split_nibbles(const QuantLayout& layout, std::byte* data, int64_t rows, int64_t k);

// A thread's share of columns [col_begin, col_end) as tiles of C columns spaced a C-th of the
// share apart (tile(c, spacing) takes columns c, c + spacing, ..., c + (C - 1) * spacing), then
// the few left over one at a time (one(c)). Each weight row of a tile is followed in memory by
// the next tile's, so a thread reads C long runs of consecutive rows, which the core's
// prefetchers follow; tiles of C neighbouring rows started C - 1 new runs a tile, and at short
// rows the reads waited on memory (one-row bf16 [4096, 4096] on a 2-core Zen 5: 0.76 -> 0.58 ms;
// q8_0 0.44 -> 0.34 ms). Which columns share a tile never changes a column's own sum.
template <int C, class Tile, class One>
void spaced_column_tiles(int64_t col_begin, int64_t col_end, Tile tile, One one) {
  const int64_t spacing = (col_end - col_begin) / C;
  for (int64_t i = 0; i < spacing; ++i) tile(col_begin + i, spacing);
  for (int64_t c = col_begin + C * spacing; c < col_end; ++c) one(c);
}

// Rows of x processed together per pass over a column block: keeps the panel in L2.
constexpr int64_t kRowPanel = 64;
// Columns computed per thread share are rounded to this, so each thread gets whole tiles.
constexpr int64_t kColumnGrain = 16;

}  // namespace lockstep::cpu
