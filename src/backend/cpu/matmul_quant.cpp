// Matmul with a quantized weight: the kernel set's fused kernel where it takes the pass (AVX2 and
// AVX-512, up to 8 rows: matmul_quant_avx2.cpp, matmul_quant_avx512.cpp); else each thread
// dequantizes a few of the weight's rows (output columns) at a time into f32, with the set's
// vector decoders where it has them, and runs the instruction set's f32 kernel on them. The f32 kernel
// sums each output element in an order fixed by k alone, and the dequantized values are the
// format's own (tensor/quant.h), so a row's result has exactly the bits of the f32 matmul of
// the dequantized weight, whatever the rows and columns that come with it.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "backend/cpu/matmul.h"
#include "tensor/quant_tensor.h"

namespace lockstep::cpu {

namespace {

// Floats of dequantized weight a thread keeps at once: 256 KiB, about a core's L2 share.
constexpr int64_t kScratchFloats = 64 * 1024;

}  // namespace

void matmul_quantized(const MatmulKernels& kernels, const MatmulArgs& a, const QuantLayout& layout, CodeOrder order,
                      int64_t col_begin, int64_t col_end) {
  if (kernels.quant && kernels.quant(a, layout, order, col_begin, col_end)) return;
  const MatmulFn f32 = kernels.f32;
  thread_local std::vector<float> scratch;
  // Columns dequantized together: as many as fit the scratch, 4 to 16, a multiple of 4 (the
  // kernels' column tile), so each row of x is read once per block of columns.
  const int64_t block = std::clamp<int64_t>(kScratchFloats / std::max<int64_t>(a.k, 1) / 4 * 4, 4, 16);
  scratch.resize(size_t(block * a.k));
  const size_t row_bytes = quant_row_total(layout, a.k);
  for (int64_t c0 = col_begin; c0 < col_end; c0 += block) {
    const int64_t count = std::min(block, col_end - c0);
    const auto* rows = static_cast<const std::byte*>(a.w) + size_t(c0) * row_bytes;
    for (int64_t c = 0; c < count; ++c) {
      const std::byte* row = rows + size_t(c) * row_bytes;
      float* values = scratch.data() + c * a.k;
      if (!kernels.dequantize || !kernels.dequantize(layout, order, row, a.k, values)) {
        if (order == CodeOrder::halves) throw std::logic_error("matmul: no decoder for codes in halves order");
        dequantize_stored_row(layout, row, a.k, values);
      }
    }
    // The f32 kernel over these columns alone: w is the scratch, out starts at column c0 and
    // keeps the whole output's row stride m.
    MatmulArgs part{a.x, scratch.data(), a.out + c0, a.n, a.k, a.m};
    f32(part, 0, count);
  }
}

bool takes_halves(const MatmulKernels& kernels, const QuantLayout& layout, int64_t k) {
  return kernels.halves && layout.format == QuantFormat::mlx_affine && layout.bits == 4 && k % 32 == 0 &&
         (layout.group == 32 || layout.group == 64 || layout.group == 128);
}

void split_nibbles(const QuantLayout& layout, std::byte* data, int64_t rows, int64_t k) {
  const size_t row_bytes = quant_row_total(layout, k);
  for (int64_t r = 0; r < rows; ++r) {
    std::byte* codes = data + size_t(r) * row_bytes;
    for (int64_t pair = 0; pair < k / 32; ++pair) {
      uint8_t* bytes = reinterpret_cast<uint8_t*>(codes + 16 * pair);
      uint8_t values[32];
      for (int i = 0; i < 16; ++i) values[2 * i] = bytes[i] & 0xF, values[2 * i + 1] = bytes[i] >> 4;
      for (int i = 0; i < 16; ++i) bytes[i] = uint8_t(values[i] | values[16 + i] << 4);
    }
  }
}

}  // namespace lockstep::cpu
