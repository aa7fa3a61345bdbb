// The quantized matmul, each format on each backend and CPU kernel set: a row's result is bit for
// bit the f32 matmul of that row alone with the weight's dequantized values, at any number of rows
// in the pass (the exactness contract, for quantized weights). Where a backend runs a format on
// the tensor cores (Backend::quant_matmul_is_f32_matmul is false: the CUDA backend's), a row's
// result is instead within kTensorCoreTolerance of that, and bit for bit the row alone through the
// same quantized weight at any width. A quantized embedding table's rows are exactly its
// dequantized values on every backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "tensor/quant.h"
#include "tensor/quant_gguf.h"
#include "tensor/quant_tensor.h"
#include "test_support.h"

namespace lockstep {
namespace {

struct Format {
  std::string name;
  QuantLayout layout;
};

// A weight of `rows` rows of k values in `layout`: quantized from random values where the format
// has a quantizer, else random blocks whose f16 scales are kept finite and small.
std::vector<std::byte> random_weight(const QuantLayout& layout, int64_t rows, int64_t k, std::mt19937& rng) {
  const size_t row_bytes = quant_row_total(layout, k);
  std::vector<std::byte> out(size_t(rows) * row_bytes);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> values(static_cast<size_t>(k));
  const QuantFormat f = layout.format;
  const bool k_quant = f == QuantFormat::q4_k || f == QuantFormat::q5_k || f == QuantFormat::q6_k;
  const bool with_min = f == QuantFormat::q4_1 || f == QuantFormat::q5_1;  // f16 d, then f16 m
  const bool random_blocks = k_quant || with_min || f == QuantFormat::q5_0 || f == QuantFormat::iq4_nl;
  for (int64_t r = 0; r < rows; ++r) {
    std::byte* row = out.data() + size_t(r) * row_bytes;
    if (!random_blocks) {
      for (float& v : values) v = normal(rng);
      EXPECT_TRUE(quantize_stored_row(layout, values.data(), k, row).ok());
      continue;
    }
    for (size_t i = 0; i < row_bytes; ++i) row[i] = std::byte(rng() & 0xff);
    const int block = gguf_block(f).bytes;
    for (size_t b = 0; b < row_bytes; b += size_t(block)) {
      const uint16_t small = uint16_t(0x2000 + (rng() & 0x3ff));  // about 0.008: finite f16
      if (layout.format == QuantFormat::q6_k) {
        std::memcpy(row + b + 208, &small, 2);
      } else if (!k_quant && !with_min) {
        std::memcpy(row + b, &small, 2);
      } else {
        std::memcpy(row + b, &small, 2);
        std::memcpy(row + b + 2, &small, 2);
      }
    }
  }
  return out;
}

// The tensor-core formats' tolerance: |got - want| at most this times sum_k |w[c][k] * x[r][k]|
// (x is split into two bf16 halves, 16 significant bits, and the tensor cores' sums round their
// own way).
constexpr double kTensorCoreTolerance = 4e-5;

// sum_k |w[c][k] * x[r][k]| for x [n, k] and w [m, k] (`values`), [n, m].
std::vector<double> magnitudes(const std::vector<float>& x, const std::vector<float>& values, int64_t n, int64_t m,
                               int64_t k) {
  std::vector<double> out(size_t(n * m));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < m; ++c) {
      double sum = 0.0;
      for (int64_t i = 0; i < k; ++i) sum += std::fabs(double(x[size_t(r * k + i)]) * double(values[size_t(c * k + i)]));
      out[size_t(r * m + c)] = sum;
    }
  return out;
}

// Where the backend runs the format on the tensor cores: each finite `want` within the
// tolerance of its magnitude, each other one not finite either.
void expect_near(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& magnitude,
                 const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(want[i])) {
      EXPECT_FALSE(std::isfinite(got[i])) << what << ", element " << i;
      continue;
    }
    EXPECT_LE(std::fabs(double(got[i]) - double(want[i])), kTensorCoreTolerance * magnitude[i])
        << what << ", element " << i << ": " << got[i] << " against " << want[i];
  }
}

struct BothMatmuls {
  std::vector<float> got, want;  // [n, m]
  std::vector<float> x;          // [n, k]
};

// n random rows of x (normal) times the quantized weight wq and times its f32 values wf, [n, m]
// each: what the backend gives, and what it should.
BothMatmuls both_matmuls(Backend& backend, const OwnedTensor& wq, const OwnedTensor& wf, int64_t n, std::mt19937& rng) {
  const int64_t m = wq.view().shape[0], k = wq.view().shape[1];
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(size_t(n * k));
  for (float& v : x) v = normal(rng);
  OwnedTensor xs = backend.alloc(DType::f32, {n, k});
  backend.upload(xs, x.data());
  OwnedTensor out = backend.alloc(DType::f32, {n, m}), want_out = backend.alloc(DType::f32, {n, m});
  backend.matmul(xs, wq, out);
  backend.matmul(xs, wf, want_out);
  std::vector<float> got(size_t(n * m)), want(size_t(n * m));
  backend.download(got.data(), out);
  backend.download(want.data(), want_out);
  return {got, want, x};
}

class QuantMatmul : public ::testing::TestWithParam<std::string> {};

std::vector<Format> formats() {
  return {
      {"q8_0", {QuantFormat::q8_0}},
      {"q4_0", {QuantFormat::q4_0}},
      {"q4_1", {QuantFormat::q4_1}},
      {"q5_0", {QuantFormat::q5_0}},
      {"q5_1", {QuantFormat::q5_1}},
      {"iq4_nl", {QuantFormat::iq4_nl}},
      {"q4_k", {QuantFormat::q4_k}},
      {"q5_k", {QuantFormat::q5_k}},
      {"q6_k", {QuantFormat::q6_k}},
      {"affine 4-bit g64 bf16", {QuantFormat::mlx_affine, 64, 4, DType::bf16}},
      {"affine 8-bit g32 f16", {QuantFormat::mlx_affine, 32, 8, DType::f16}},
      {"affine 2-bit g128 bf16", {QuantFormat::mlx_affine, 128, 2, DType::bf16}},
      {"affine 3-bit g64 bf16", {QuantFormat::mlx_affine, 64, 3, DType::bf16}},
      {"affine 5-bit g32 f16", {QuantFormat::mlx_affine, 32, 5, DType::f16}},
      {"affine 6-bit g128 bf16", {QuantFormat::mlx_affine, 128, 6, DType::bf16}},
      {"affine 4-bit g32 f32", {QuantFormat::mlx_affine, 32, 4, DType::f32}},
      {"fp8 g128", {QuantFormat::fp8_e4m3, 128, 0, DType::f32}},
      {"fp8 g32", {QuantFormat::fp8_e4m3, 32, 0, DType::f32}},
  };
}

TEST_P(QuantMatmul, ARowsBitsAreTheF32MatmulOfItsValuesAtAnyWidth) {
  // (On the tensor cores: within the tolerance of it, and the row's bits alone at any width.)
  std::unique_ptr<Backend> backend = make_test_backend(GetParam());
  const int64_t m = 37;
  std::mt19937 rng(7);
  // k = 8448 makes the scratch path dequantize 4 columns at a time, k = 512 16 of them; passes
  // of up to 8 rows take the AVX2 or AVX-512 set's fused kernel where it has one (the cpu-avx2
  // backend runs the AVX2 set on an AVX-512 machine). k = 2688 (the 30B
  // shape's width, formats whose blocks divide it) gives Q8_0 and Q4_0 rows that start off a
  // 16-byte boundary, as Q6_K's do at 512.
  // Prepared weights (Backend::prepare_matmul_weight: the CPU's MLX 4-bit codes rearranged) give
  // the same bits as the stored ones.
  for (bool prepared : {false, true})
  for (int64_t k : {512, 8448, 2688})
  for (const Format& format : formats()) {
    if (k % block_values(format.layout) != 0) continue;
    SCOPED_TRACE(format.name + ", k " + std::to_string(k) + (prepared ? ", prepared" : ""));
    const std::vector<std::byte> stored = random_weight(format.layout, m, k, rng);
    OwnedTensor wq = backend->alloc_quantized(format.layout, {m, k});
    backend->upload(wq, stored.data());
    if (prepared) backend->prepare_matmul_weight(wq);
    // The f32 weight of the same values.
    std::vector<float> values(size_t(m * k));
    for (int64_t r = 0; r < m; ++r)
      dequantize_stored_row(format.layout, stored.data() + size_t(r) * quant_row_total(format.layout, k), k,
                            values.data() + r * k);
    OwnedTensor wf = backend->alloc(DType::f32, {m, k});
    backend->upload(wf, values.data());
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const std::vector<int64_t> widths = k == 512 ? std::vector<int64_t>{1, 2, 3, 5, 8, 16, 17, 64, 65, 300}
                                                 : std::vector<int64_t>{1, 4, 8, 9, 16, 33};
    for (int64_t n : widths) {
      std::vector<float> x(size_t(n * k));
      for (float& v : x) v = normal(rng);
      OwnedTensor xs = backend->alloc(DType::f32, {n, k});
      backend->upload(xs, x.data());
      OwnedTensor out = backend->alloc(DType::f32, {n, m});
      backend->matmul(xs, wq, out);
      std::vector<float> got(size_t(n * m));
      backend->download(got.data(), out);
      // Each row alone, through the f32 weight (or, on the tensor cores, the quantized one, and
      // the f32 weight within the tolerance).
      const bool exact = backend->quant_matmul_is_f32_matmul(format.layout);
      OwnedTensor one = backend->alloc(DType::f32, {1, m});
      std::vector<float> want(static_cast<size_t>(m)), values_want(static_cast<size_t>(m));
      for (int64_t r = 0; r < n; r += std::max<int64_t>(1, n / 7)) {
        backend->matmul(xs.view().first_dim_slice(r, 1), exact ? wf : wq, one);
        backend->download(want.data(), one);
        ASSERT_EQ(std::memcmp(got.data() + r * m, want.data(), size_t(m) * 4), 0) << "row " << r << " of " << n;
        if (exact) continue;
        backend->matmul(xs.view().first_dim_slice(r, 1), wf, one);
        backend->download(values_want.data(), one);
        const std::vector<float> x_row(x.begin() + r * k, x.begin() + (r + 1) * k);
        expect_near(want, values_want, magnitudes(x_row, values, 1, m, k), "row " + std::to_string(r));
      }
    }
  }
}

TEST_P(QuantMatmul, HugeAndInfiniteScalesMultiplyAsTheirValues) {
  // Scales at the edges of their types (the largest finite f16, 2^101 in f32, infinities): a
  // row's sums are still the f32 matmul's of its values (a NaN as any NaN), so no decoder may
  // take a shortcut that holds only for ordinary scales (a fused multiply-add of a code's
  // magic-number float and its scale, tried on the GPU, overflows past 2^104 and turns a zero
  // code's -0 into +0).
  std::unique_ptr<Backend> backend = make_test_backend(GetParam());
  const int64_t m = 6, k = 512;
  std::mt19937 rng(5);
  const uint16_t f16_inf = 0x7c00, f16_big = 0x7bff;  // 65504: fusable, the largest finite f16
  const float f32_huge = 0x1p101f, f32_inf = INFINITY;
  for (const Format& format : formats()) {
    const QuantFormat f = format.layout.format;
    const bool affine_f32 = f == QuantFormat::mlx_affine && format.layout.scale_type == DType::f32;
    if (f != QuantFormat::q8_0 && f != QuantFormat::q4_k && f != QuantFormat::q6_k && !affine_f32) continue;
    SCOPED_TRACE(format.name);
    std::vector<std::byte> stored = random_weight(format.layout, m, k, rng);
    const size_t row_bytes = quant_row_total(format.layout, k);
    // Row r's first block (or group) gets an unusual scale: rows 0 and 3 infinite, 1 and 4
    // huge, 2 and 5 keep theirs.
    for (int64_t r = 0; r < m; ++r) {
      std::byte* row = stored.data() + size_t(r) * row_bytes;
      const int kind = int(r % 3);
      if (kind == 2) continue;
      if (affine_f32) {
        const float scale = kind == 0 ? f32_inf : f32_huge;
        std::memcpy(row + size_t(k) * size_t(format.layout.bits) / 8, &scale, 4);
      } else {
        const uint16_t d = kind == 0 ? f16_inf : f16_big;
        std::memcpy(row + (f == QuantFormat::q6_k ? 208 : 0), &d, 2);
      }
    }
    std::vector<float> values(size_t(m * k));
    for (int64_t r = 0; r < m; ++r)
      dequantize_stored_row(format.layout, stored.data() + size_t(r) * row_bytes, k, values.data() + r * k);
    OwnedTensor wq = backend->alloc_quantized(format.layout, {m, k});
    backend->upload(wq, stored.data());
    OwnedTensor wf = backend->alloc(DType::f32, {m, k});
    backend->upload(wf, values.data());
    for (int64_t n : {1, 3, 20}) {
      const auto [got, want, x] = both_matmuls(*backend, wq, wf, n, rng);
      if (!backend->quant_matmul_is_f32_matmul(format.layout)) {
        expect_near(got, want, magnitudes(x, values, n, m, k), "rows " + std::to_string(n));
        continue;
      }
      for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(got[i])) << "rows " << n << ", element " << i;
          continue;
        }
        uint32_t a, b;
        std::memcpy(&a, &got[i], 4);
        std::memcpy(&b, &want[i], 4);
        EXPECT_EQ(a, b) << "rows " << n << ", element " << i << ": " << got[i] << " against " << want[i];
      }
    }
  }
}

TEST_P(QuantMatmul, EmbeddingRowsAreTheDequantizedValues) {
  std::unique_ptr<Backend> backend = make_test_backend(GetParam());
  const int64_t rows = 29, d = 512;
  std::mt19937 rng(11);
  for (const Format& format : formats()) {
    SCOPED_TRACE(format.name);
    const std::vector<std::byte> stored = random_weight(format.layout, rows, d, rng);
    OwnedTensor table = backend->alloc_quantized(format.layout, {rows, d});
    backend->upload(table, stored.data());
    const std::vector<int32_t> ids = {28, 0, 5, 5, 17, 3};
    OwnedTensor id_tensor = backend->alloc(DType::i32, {int64_t(ids.size())});
    backend->upload(id_tensor, ids.data());
    OwnedTensor out = backend->alloc(DType::f32, {int64_t(ids.size()), d});
    backend->embed(table, id_tensor, out);
    std::vector<float> got(ids.size() * size_t(d)), want(static_cast<size_t>(d));
    backend->download(got.data(), out);
    for (size_t i = 0; i < ids.size(); ++i) {
      dequantize_stored_row(format.layout, stored.data() + size_t(ids[i]) * quant_row_total(format.layout, d), d,
                            want.data());
      ASSERT_EQ(std::memcmp(got.data() + i * size_t(d), want.data(), size_t(d) * 4), 0) << "id " << ids[i];
    }
  }
}

TEST_P(QuantMatmul, EveryFp8CodeMultipliesAsItsValue) {
  // Weight rows holding every code but the two NaNs (subnormals, both zeros, both signs), in a
  // different order a row, and one row with a NaN code: the first rows' sums are bit for bit
  // the f32 matmul's of their values (the CPU builds each code's value in registers; on the
  // tensor cores, within the tolerance of it), the NaN row's are NaN.
  std::unique_ptr<Backend> backend = make_test_backend(GetParam());
  const QuantLayout layout{QuantFormat::fp8_e4m3, 32, 0, DType::f32};
  const int64_t k = 256, m = 5;
  const size_t row_bytes = quant_row_total(layout, k);
  std::vector<std::byte> stored(size_t(m) * row_bytes);
  for (int64_t row = 0; row < m; ++row) {
    std::byte* at = stored.data() + size_t(row) * row_bytes;
    for (int i = 0; i < 256; ++i) {
      const int code = (i * (2 * int(row) + 1) + int(row)) % 256;
      at[i] = std::byte((code & 0x7f) == 0x7f && row + 1 < m ? 0 : code);
    }
    for (int b = 0; b < 8; ++b) {
      const float scale = 0.25f + 0.07f * float(b + row);
      std::memcpy(at + k + 4 * b, &scale, 4);
    }
  }
  std::vector<float> values(size_t(m * k));
  for (int64_t r = 0; r < m; ++r) dequantize_stored_row(layout, stored.data() + size_t(r) * row_bytes, k, values.data() + r * k);
  OwnedTensor wq = backend->alloc_quantized(layout, {m, k});
  backend->upload(wq, stored.data());
  OwnedTensor wf = backend->alloc(DType::f32, {m, k});
  backend->upload(wf, values.data());
  std::mt19937 rng(3);
  const bool exact = backend->quant_matmul_is_f32_matmul(layout);
  for (int64_t n : {1, 3, 8}) {
    const auto [got, want, x] = both_matmuls(*backend, wq, wf, n, rng);
    const std::vector<double> magnitude = magnitudes(x, values, n, m, k);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < m; ++c) {
        const size_t i = size_t(r * m + c);
        if (c + 1 == m) {
          EXPECT_TRUE(std::isnan(got[i]));
          continue;
        }
        if (!exact) {
          EXPECT_LE(std::fabs(double(got[i]) - double(want[i])), kTensorCoreTolerance * magnitude[i])
              << "rows " << n << ", row " << r << ", column " << c;
          continue;
        }
        uint32_t a, b;
        std::memcpy(&a, &got[i], 4);
        std::memcpy(&b, &want[i], 4);
        EXPECT_EQ(a, b) << "rows " << n << ", row " << r << ", column " << c;
      }
  }
}

TEST_P(QuantMatmul, EveryFp8CodeEmbedsAsItsValue) {
  std::unique_ptr<Backend> backend = make_test_backend(GetParam());
  const QuantLayout layout{QuantFormat::fp8_e4m3, 32, 0, DType::f32};
  const int64_t d = 256;  // codes 0 to 255 in order (NaN, subnormals, both zeros), 8 scales
  const size_t row_bytes = quant_row_total(layout, d);
  std::vector<std::byte> stored(2 * row_bytes);
  for (int row = 0; row < 2; ++row) {
    std::byte* at = stored.data() + size_t(row) * row_bytes;
    for (int code = 0; code < 256; ++code) at[code] = std::byte(code);
    for (int b = 0; b < 8; ++b) {
      const float scale = row == 0 ? 1.0f : 0.3f + 0.01f * float(b);
      std::memcpy(at + d + 4 * b, &scale, 4);
    }
  }
  OwnedTensor table = backend->alloc_quantized(layout, {2, d});
  backend->upload(table, stored.data());
  const std::vector<int32_t> ids = {0, 1};
  OwnedTensor id_tensor = backend->alloc(DType::i32, {2});
  backend->upload(id_tensor, ids.data());
  OwnedTensor out = backend->alloc(DType::f32, {2, d});
  backend->embed(table, id_tensor, out);
  std::vector<float> got(2 * size_t(d)), want(2 * size_t(d));
  backend->download(got.data(), out);
  for (int row = 0; row < 2; ++row)
    dequantize_stored_row(layout, stored.data() + size_t(row) * row_bytes, d, want.data() + row * d);
  // Bit for bit, but a NaN is any NaN: arithmetic on a GPU makes every NaN its canonical one.
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "code " << i % 256;
      continue;
    }
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    EXPECT_EQ(a, b) << "code " << i % 256 << " of row " << i / 256;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, QuantMatmul, ::testing::ValuesIn(test_backend_names()), backend_param_name);

// The CPU backend remembers which memory prepare_matmul_weight rearranged (MLX 4-bit codes in
// halves order): an expert's slice of a prepared stack reads as prepared, an upload over one
// expert returns that expert alone to the stored order, and freed memory forgets it.
TEST(CpuPreparedWeights, SlicesUploadsAndReleasesKeepEachWeightsOrder) {
  CpuBackend backend(2);
  if (std::string(backend.isa()) != "avx512") GTEST_SKIP() << "only the AVX-512 set rearranges 4-bit codes";
  const QuantLayout layout{QuantFormat::mlx_affine, 64, 4, DType::bf16};
  const int64_t experts = 3, m = 16, k = 256;
  std::mt19937 rng(11);
  std::vector<std::byte> stored = random_weight(layout, experts * m, k, rng);
  const size_t matrix_bytes = stored.size() / size_t(experts);
  std::vector<float> x(static_cast<size_t>(k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  OwnedTensor xs = backend.alloc(DType::f32, {1, k});
  backend.upload(xs, x.data());
  // Row x times expert e's matrix, taken from `stack`.
  auto product = [&](const Tensor& stack, int64_t e) {
    OwnedTensor out = backend.alloc(DType::f32, {1, m});
    backend.matmul(xs, stack.first_dim_slice(e, 1).reshaped(Shape{m, k}), out);
    std::vector<float> got(static_cast<size_t>(m));
    backend.download(got.data(), out);
    return got;
  };
  OwnedTensor reference = backend.alloc_quantized(layout, {experts, m, k});  // never prepared
  backend.upload(reference, stored.data());
  OwnedTensor stack = backend.alloc_quantized(layout, {experts, m, k});
  backend.upload(stack, stored.data());
  backend.prepare_matmul_weight(stack);
  backend.prepare_matmul_weight(stack);  // a second time changes nothing
  for (int64_t e = 0; e < experts; ++e) EXPECT_EQ(product(stack, e), product(reference, e)) << "expert " << e;
  EXPECT_THROW(backend.prepare_matmul_weight(stack.view().first_dim_slice(1, 2)), std::logic_error);

  // Expert 1 uploaded again, with other codes: it reads in the stored order, 0 and 2 as prepared.
  const std::vector<std::byte> other = random_weight(layout, m, k, rng);
  backend.upload(stack.view().first_dim_slice(1, 1), other.data());
  std::copy(other.begin(), other.end(), stored.begin() + std::ptrdiff_t(matrix_bytes));
  backend.upload(reference, stored.data());
  for (int64_t e = 0; e < experts; ++e) EXPECT_EQ(product(stack, e), product(reference, e)) << "expert " << e;

  // Freed, and the memory taken again by a weight left in the stored order.
  const void* was = stack.view().data;
  stack = OwnedTensor();
  OwnedTensor again = backend.alloc_quantized(layout, {experts, m, k});
  backend.upload(again, stored.data());
  SCOPED_TRACE(again.view().data == was ? "the same memory" : "other memory");
  for (int64_t e = 0; e < experts; ++e) EXPECT_EQ(product(again, e), product(reference, e)) << "expert " << e;
}

// An embedding table tied to the LM head takes the matmuls' order too (prepare_tied_table): embed
// then gives each row exactly as from the stored order, and the head's products are the same.
TEST(CpuPreparedWeights, ATiedTableEmbedsAndMultipliesAsStored) {
  CpuBackend backend(2);
  if (std::string(backend.isa()) != "avx512") GTEST_SKIP() << "only the AVX-512 set rearranges 4-bit codes";
  for (const int group : {32, 64, 128}) {
    const QuantLayout layout{QuantFormat::mlx_affine, group, 4, DType::bf16};
    const int64_t vocab = 40, k = 256;
    std::mt19937 rng{uint32_t(group)};
    const std::vector<std::byte> stored = random_weight(layout, vocab, k, rng);
    OwnedTensor plain = backend.alloc_quantized(layout, {vocab, k});
    backend.upload(plain, stored.data());
    OwnedTensor tied = backend.alloc_quantized(layout, {vocab, k});
    backend.upload(tied, stored.data());
    backend.prepare_tied_table(tied);
    EXPECT_NE(std::memcmp(tied.view().data, stored.data(), stored.size()), 0) << "the codes were rearranged";
    const std::vector<int32_t> ids = {0, 39, 7, 7, 21};
    OwnedTensor id_tensor = backend.alloc(DType::i32, {int64_t(ids.size())});
    backend.upload(id_tensor, ids.data());
    auto embedded = [&](const Tensor& table) {
      OwnedTensor out = backend.alloc(DType::f32, {int64_t(ids.size()), k});
      backend.embed(table, id_tensor, out);
      std::vector<float> values(ids.size() * size_t(k));
      backend.download(values.data(), out);
      return values;
    };
    const std::vector<float> rows = embedded(plain);
    const std::vector<float> got = embedded(tied);
    EXPECT_EQ(std::memcmp(rows.data(), got.data(), rows.size() * 4), 0) << "group " << group;
    OwnedTensor x = backend.alloc(DType::f32, {int64_t(ids.size()), k});
    backend.upload(x, rows.data());
    auto logits = [&](const Tensor& head) {
      OwnedTensor out = backend.alloc(DType::f32, {int64_t(ids.size()), vocab});
      backend.matmul(x, head, out);
      std::vector<float> values(ids.size() * size_t(vocab));
      backend.download(values.data(), out);
      return values;
    };
    EXPECT_EQ(logits(tied), logits(plain)) << "group " << group;
  }
}

}  // namespace
}  // namespace lockstep
