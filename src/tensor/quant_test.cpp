#include "tensor/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace lockstep {
namespace {

// One case of tests/data/quant/cases.txt, written by scripts/make-quant-fixtures from gguf-py
// (GGUF) and from numpy references of transformers' definitions (MLX affine, FP8).
struct QuantCase {
  std::string name;
  QuantLayout layout;
  size_t n = 0, rows = 0;
  std::vector<float> input;  // empty for a case that only dequantizes
  std::vector<uint8_t> values, scales, biases;
  std::vector<float> expected;

  QuantRows parts() const { return {values, scales, biases}; }
};

QuantFormat parse_format(const std::string& name) {
  for (QuantFormat format : {QuantFormat::q8_0, QuantFormat::q4_0, QuantFormat::q4_1, QuantFormat::q5_0,
                             QuantFormat::q5_1, QuantFormat::iq4_nl, QuantFormat::q4_k, QuantFormat::q5_k,
                             QuantFormat::q6_k, QuantFormat::mlx_affine, QuantFormat::fp8_e4m3}) {
    if (quant_format_name(format) == name) return format;
  }
  ADD_FAILURE() << "unknown format " << name;
  return QuantFormat::q8_0;
}

DType parse_scale_type(const std::string& name) {
  if (name == "bf16") return DType::bf16;
  if (name == "f16") return DType::f16;
  return DType::f32;  // "f32", or "-" for GGUF, whose scales are inside its blocks
}

std::vector<float> floats_of(const std::string& bytes) {
  std::vector<float> out(bytes.size() / 4);
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

std::vector<QuantCase> read_cases() {
  const std::string dir = std::string(LOCKSTEP_TEST_DATA) + "/quant/";
  std::ifstream manifest(dir + "cases.txt");
  EXPECT_TRUE(manifest) << "no " << dir << "cases.txt: run scripts/make-quant-fixtures";
  std::vector<QuantCase> cases;
  std::string line;
  while (std::getline(manifest, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    QuantCase c;
    std::string format, scale_type;
    size_t sizes[5];
    fields >> c.name >> format >> c.n >> c.rows >> c.layout.group >> c.layout.bits >> scale_type;
    for (size_t& size : sizes) fields >> size;
    EXPECT_TRUE(fields) << "bad line: " << line;
    c.layout.format = parse_format(format);
    c.layout.scale_type = parse_scale_type(scale_type);
    std::ifstream file(dir + c.name + ".bin", std::ios::binary);
    std::string bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    EXPECT_EQ(bytes.size(), sizes[0] + sizes[1] + sizes[2] + sizes[3] + sizes[4]) << c.name;
    if (bytes.size() != sizes[0] + sizes[1] + sizes[2] + sizes[3] + sizes[4]) continue;
    std::string parts[5];
    size_t at = 0;
    for (int i = 0; i < 5; ++i) {
      parts[i] = bytes.substr(at, sizes[i]);
      at += sizes[i];
    }
    c.input = floats_of(parts[0]);
    c.values.assign(parts[1].begin(), parts[1].end());
    c.scales.assign(parts[2].begin(), parts[2].end());
    c.biases.assign(parts[3].begin(), parts[3].end());
    c.expected = floats_of(parts[4]);
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<QuantCase>& cases() {
  static const std::vector<QuantCase> all = read_cases();
  return all;
}

uint32_t bits_of(float value) {
  uint32_t word;
  std::memcpy(&word, &value, 4);
  return word;
}

::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " values, but the reference has " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (bits_of(got[i]) != bits_of(want[i]))
      return ::testing::AssertionFailure() << "value " << i << " is " << got[i] << " (bits 0x" << std::hex
                                           << bits_of(got[i]) << "), the reference's " << want[i] << " (0x"
                                           << bits_of(want[i]) << ")";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_bytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " bytes, but the reference has " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i])
      return ::testing::AssertionFailure() << "byte " << i << " is " << int(got[i]) << ", the reference's "
                                           << int(want[i]);
  }
  return ::testing::AssertionSuccess();
}

bool per_tensor(const QuantLayout& layout) { return layout.format == QuantFormat::fp8_e4m3 && layout.group == 0; }

TEST(QuantFixtures, CoverEveryFormatAndEachQuantizer) {
  std::set<QuantFormat> dequantized;
  std::set<std::string> quantized;
  for (const QuantCase& c : cases()) {
    dequantized.insert(c.layout.format);
    if (c.input.empty()) continue;
    std::string name(quant_format_name(c.layout.format));
    if (c.layout.format == QuantFormat::mlx_affine) name += " bits " + std::to_string(c.layout.bits);
    if (c.layout.format == QuantFormat::fp8_e4m3) name += " group " + std::to_string(c.layout.group);
    quantized.insert(name);
  }
  EXPECT_EQ(dequantized.size(), 11u);
  EXPECT_EQ(quantized, (std::set<std::string>{"q8_0", "q4_0", "mlx_affine bits 2", "mlx_affine bits 3",
                                              "mlx_affine bits 4", "mlx_affine bits 5", "mlx_affine bits 6",
                                              "mlx_affine bits 8", "fp8_e4m3 group 0", "fp8_e4m3 group 32",
                                              "fp8_e4m3 group 64", "fp8_e4m3 group 128"}));
}

TEST(QuantFixtures, PartsHaveTheRowBytesOfTheirLayout) {
  for (const QuantCase& c : cases()) {
    Expected<RowBytes> bytes = quant_row_bytes(c.layout, c.n);
    ASSERT_TRUE(bytes.ok()) << c.name << ": " << bytes.error().message;
    EXPECT_EQ(c.values.size(), c.rows * bytes->values) << c.name;
    EXPECT_EQ(c.scales.size(), per_tensor(c.layout) ? 4 : c.rows * bytes->scales) << c.name;
    EXPECT_EQ(c.biases.size(), c.rows * bytes->biases) << c.name;
    EXPECT_EQ(c.expected.size(), c.rows * c.n) << c.name;
  }
}

TEST(QuantFixtures, DequantizeEqualsTheReferenceBitForBit) {
  ASSERT_FALSE(cases().empty());
  for (const QuantCase& c : cases()) {
    std::vector<float> out(c.rows * c.n);
    Status done = dequantize_rows(c.layout, c.n, c.parts(), out);
    ASSERT_TRUE(done.ok()) << c.name << ": " << done.message();
    EXPECT_TRUE(same_bits(out, c.expected)) << c.name;
  }
}

TEST(QuantFixtures, QuantizeEqualsTheReferenceByteForByte) {
  for (const QuantCase& c : cases()) {
    if (c.input.empty()) continue;
    std::vector<uint8_t> values(c.values.size()), scales(c.scales.size()), biases(c.biases.size());
    Status done = quantize_rows(c.layout, c.n, c.input, {values, scales, biases});
    ASSERT_TRUE(done.ok()) << c.name << ": " << done.message();
    EXPECT_TRUE(same_bytes(values, c.values)) << c.name << " values";
    EXPECT_TRUE(same_bytes(scales, c.scales)) << c.name << " scales";
    EXPECT_TRUE(same_bytes(biases, c.biases)) << c.name << " biases";
  }
}

// A row's values do not depend on the rows around it: one at a time gives the same bits.
TEST(QuantFixtures, EachRowAloneGivesTheSameValues) {
  for (const QuantCase& c : cases()) {
    Expected<RowBytes> bytes = quant_row_bytes(c.layout, c.n);
    ASSERT_TRUE(bytes.ok()) << c.name;
    std::vector<float> out(c.rows * c.n);
    for (size_t r = 0; r < c.rows; ++r) {
      std::span<const uint8_t> scales = std::span(c.scales);
      if (!per_tensor(c.layout)) scales = scales.subspan(r * bytes->scales, bytes->scales);
      QuantRows row{std::span(c.values).subspan(r * bytes->values, bytes->values), scales,
                    std::span(c.biases).subspan(r * bytes->biases, bytes->biases)};
      Status done = dequantize_row(c.layout, row, std::span(out).subspan(r * c.n, c.n));
      ASSERT_TRUE(done.ok()) << c.name << ": " << done.message();
    }
    EXPECT_TRUE(same_bits(out, c.expected)) << c.name;
  }
}

TEST(QuantLayout, BytesPerRowAreTheFormatsOwn) {
  struct Row {
    QuantLayout layout;
    size_t n, values, scales, biases;
  } rows[] = {
      {{QuantFormat::q8_0}, 64, 68, 0, 0},
      {{QuantFormat::q4_0}, 32, 18, 0, 0},
      {{QuantFormat::q4_k}, 512, 288, 0, 0},
      {{QuantFormat::q5_k}, 256, 176, 0, 0},
      {{QuantFormat::q6_k}, 256, 210, 0, 0},
      {{QuantFormat::mlx_affine, 64, 4, DType::bf16}, 128, 64, 4, 4},
      {{QuantFormat::mlx_affine, 32, 2, DType::f16}, 64, 16, 4, 4},
      {{QuantFormat::mlx_affine, 128, 8, DType::f32}, 256, 256, 8, 8},
      {{QuantFormat::fp8_e4m3, 128, 0, DType::f32}, 256, 256, 8, 0},
      {{QuantFormat::fp8_e4m3, 0, 0, DType::f32}, 100, 100, 0, 0},
  };
  for (const Row& row : rows) {
    Expected<RowBytes> bytes = quant_row_bytes(row.layout, row.n);
    ASSERT_TRUE(bytes.ok()) << bytes.error().message;
    EXPECT_EQ(bytes->values, row.values) << quant_format_name(row.layout.format);
    EXPECT_EQ(bytes->scales, row.scales) << quant_format_name(row.layout.format);
    EXPECT_EQ(bytes->biases, row.biases) << quant_format_name(row.layout.format);
  }
}

TEST(QuantLayout, RefusesRowsThatAreNotWholeBlocks) {
  Expected<RowBytes> k = quant_row_bytes({QuantFormat::q4_k}, 100);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().message, "q4_k: a row of 100 values is not a whole number of blocks of 256");
  EXPECT_FALSE(quant_row_bytes({QuantFormat::q8_0}, 48).ok());
  EXPECT_FALSE(quant_row_bytes({QuantFormat::q8_0}, 0).ok());
  EXPECT_FALSE(quant_row_bytes({QuantFormat::mlx_affine, 64, 4, DType::bf16}, 96).ok());
  EXPECT_FALSE(quant_row_bytes({QuantFormat::fp8_e4m3, 128, 0, DType::f32}, 64).ok());

  std::vector<uint8_t> blocks(144);
  std::vector<float> out(200);
  Status refused = dequantize_rows({QuantFormat::q4_k}, 200, {blocks, {}, {}}, out);
  EXPECT_EQ(refused.message(), "q4_k: a row of 200 values is not a whole number of blocks of 256");
  std::vector<float> x(40);
  std::vector<uint8_t> q(40);
  EXPECT_FALSE(quantize_rows({QuantFormat::q8_0}, 40, x, {q, {}, {}}).ok());
}

TEST(QuantLayout, RefusesLayoutsTheFormatDoesNotDefine) {
  Status seven = check_layout({QuantFormat::mlx_affine, 64, 7, DType::bf16});
  EXPECT_EQ(seven.message(), "mlx_affine: 7 bits a value is not read (2, 3, 4, 5, 6 or 8 are)");
  EXPECT_FALSE(check_layout({QuantFormat::mlx_affine, 64, 1, DType::bf16}).ok());
  EXPECT_FALSE(check_layout({QuantFormat::mlx_affine, 64, 16, DType::bf16}).ok());
  EXPECT_FALSE(check_layout({QuantFormat::mlx_affine, 48, 4, DType::bf16}).ok());
  EXPECT_FALSE(check_layout({QuantFormat::mlx_affine, 64, 4, DType::i32}).ok());
  EXPECT_FALSE(check_layout({QuantFormat::fp8_e4m3, 16, 0, DType::f32}).ok());
  EXPECT_FALSE(check_layout({QuantFormat::fp8_e4m3, 128, 0, DType::bf16}).ok());
  EXPECT_TRUE(check_layout({QuantFormat::fp8_e4m3, 0, 0, DType::f32}).ok());
  EXPECT_TRUE(check_layout({QuantFormat::q6_k}).ok());
}

TEST(QuantLayout, RefusesPartsOfTheWrongSizeAndWritesNothing) {
  std::vector<uint8_t> blocks(2 * 34 - 1);
  std::vector<float> out(64, 7.0f);
  Status short_values = dequantize_rows({QuantFormat::q8_0}, 32, {blocks, {}, {}}, out);
  EXPECT_EQ(short_values.message(), "q8_0: values hold 67 bytes, but 2 rows of 32 values need 68");
  EXPECT_EQ(out, std::vector<float>(64, 7.0f));
  blocks.resize(68);
  EXPECT_FALSE(dequantize_rows({QuantFormat::q8_0}, 48, {blocks, {}, {}}, out).ok());  // not whole rows

  QuantLayout affine{QuantFormat::mlx_affine, 32, 4, DType::f16};
  std::vector<uint8_t> words(16), scales(2), biases(4);
  std::vector<float> row(32);
  Status no_bias = dequantize_row(affine, {words, scales, biases}, row);
  EXPECT_EQ(no_bias.message(), "mlx_affine: biases hold 4 bytes, but 1 row of 32 values needs 2");
  QuantLayout tensor{QuantFormat::fp8_e4m3, 0, 0, DType::f32};
  std::vector<uint8_t> codes(32), two_scales(8);
  EXPECT_FALSE(dequantize_row(tensor, {codes, two_scales, {}}, row).ok());
}

TEST(QuantRoundTrip, KQuantsHaveNoQuantize) {
  std::vector<float> x(256);
  std::vector<uint8_t> blocks(144);
  Status refused = quantize_rows({QuantFormat::q4_k}, 256, x, {blocks, {}, {}});
  EXPECT_EQ(refused.message(), "q4_k: quantize is not defined (gguf-py has no reference for it)");
}

// Each quantizer's error on random rows stays within its step (half a step where nothing is
// clipped), allowing for the rounding of stored scales to f16 or bf16.
TEST(QuantRoundTrip, EachQuantizerStaysWithinItsStep) {
  std::mt19937 random(26);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t n = 256, rows = 8;
  std::vector<float> x(n * rows);
  for (float& v : x) v = normal(random) * 0.05f;
  x[3] = 2.0f;  // an outlier
  QuantLayout layouts[] = {{QuantFormat::q8_0},
                           {QuantFormat::q4_0},
                           {QuantFormat::mlx_affine, 64, 4, DType::bf16},
                           {QuantFormat::mlx_affine, 32, 8, DType::f16},
                           {QuantFormat::mlx_affine, 128, 2, DType::bf16},
                           {QuantFormat::fp8_e4m3, 128, 0, DType::f32},
                           {QuantFormat::fp8_e4m3, 0, 0, DType::f32}};
  for (const QuantLayout& layout : layouts) {
    Expected<RowBytes> bytes = quant_row_bytes(layout, n);
    ASSERT_TRUE(bytes.ok());
    std::vector<uint8_t> values(rows * bytes->values), biases(rows * bytes->biases);
    std::vector<uint8_t> scales(per_tensor(layout) ? 4 : rows * bytes->scales);
    ASSERT_TRUE(quantize_rows(layout, n, x, {values, scales, biases}).ok());
    std::vector<float> y(x.size());
    ASSERT_TRUE(dequantize_rows(layout, n, {values, scales, biases}, y).ok());
    const size_t block = size_t(block_values(layout) == 1 ? x.size() : block_values(layout));
    for (size_t first = 0; first < x.size(); first += block) {
      float amax = 0, lo = x[first], hi = 0;
      for (size_t i = first; i < first + block; ++i) {
        amax = std::max(amax, std::fabs(x[i]));
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
      }
      float bound = 0;
      switch (layout.format) {
        case QuantFormat::q8_0: bound = 0.6f * amax / 127; break;  // half a step, and d in f16
        case QuantFormat::q4_0: bound = 1.01f * amax / 8; break;   // -max's code 16 clips to 15
        case QuantFormat::mlx_affine: {
          // A whole step: the grid is moved to put 0 on a code, so the far edge may be clipped.
          float step = (hi - lo) / float((1 << layout.bits) - 1);
          bound = step + (amax + step * float(1 << layout.bits)) / 128;  // and bf16 scales
          break;
        }
        default: bound = amax / 448 / 8;  // subnormal codes' step; normal ones are relative
      }
      for (size_t i = first; i < first + block; ++i) {
        float allowed = layout.format == QuantFormat::fp8_e4m3 ? std::max(bound, std::fabs(x[i]) / 16) : bound;
        ASSERT_LE(std::fabs(y[i] - x[i]), allowed * 1.001f + 1e-7f)
            << quant_format_name(layout.format) << " value " << i << ": " << x[i] << " came back " << y[i];
      }
    }
  }
}

TEST(QuantConversions, E4m3DecodesTheFormatsValues) {
  EXPECT_EQ(e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0xb8), -1.0f);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f) continue;
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(uint8_t(code))), code);
  }
}

TEST(QuantConversions, E4m3RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);  // halfway between 1 and 1.125: to even 1
  EXPECT_EQ(f32_to_e4m3(1.1875f), 0x3a);  // halfway between 1.125 and 1.25: to even 1.25
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -10)), 0x00);      // half the smallest subnormal
  EXPECT_EQ(f32_to_e4m3(std::ldexp(3.0f, -10)), 0x02);      // 1.5 subnormal steps: to 2
  EXPECT_EQ(f32_to_e4m3(-std::ldexp(1.0f, -12)), 0x80);     // rounds to -0
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(-1e30f), 0xfe);
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
}

TEST(QuantConversions, F16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);        // a tie: to even
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);        // a tie: to even
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                            // rounds past the largest
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7c00) == 0x7c00) continue;  // infinities and NaNs
    ASSERT_EQ(f32_to_f16(f16_to_f32(uint16_t(bits))), bits);
  }
}

// The GPU decodes MLX affine weights with 16-bit scales as fma(code, scale, bias) where the
// format says code * scale + bias (cuda_quant.cuh): the same bits because every such product is
// exact in f32 (a scale's 8 or 11 significant bits times a code's 8 at most), so the fused form
// rounds once where the two-step form rounded only at its add. (Unless the product overflows: a
// bf16 scale past 1.3e36, which no quantizer writes, since a scale is a group's range over the
// codes.)
TEST(QuantConversions, SixteenBitScalesTimesCodesAreExactInF32) {
  for (bool bf16 : {true, false})
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const float scale = bf16 ? bf16_to_f32(uint16_t(bits)) : f16_to_f32(uint16_t(bits));
      if (!std::isfinite(scale)) continue;
      for (int code = 0; code < 256; ++code) {
        const float product = float(code) * scale;
        if (std::isinf(product)) continue;
        ASSERT_EQ(double(product), double(code) * double(scale)) << (bf16 ? "bf16" : "f16") << " " << bits;
      }
    }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (int i = 0; i < 100000; ++i) {
    const float scale = bf16_to_f32(uint16_t(rng() >> 16)), code = float(rng() % 256);
    if (!std::isfinite(scale)) continue;
    const float bias = unit(rng) * scale * 128.0f;
    volatile float product = code * scale;  // rounded on its own, never contracted
    if (!std::isfinite(bias) || std::isinf(product)) continue;
    const float two_step = product + bias, fused = std::fma(code, scale, bias);
    uint32_t a, b;
    std::memcpy(&a, &two_step, 4), std::memcpy(&b, &fused, 4);
    ASSERT_EQ(a, b) << code << " * " << scale << " + " << bias;
  }
}

}  // namespace
}  // namespace lockstep
