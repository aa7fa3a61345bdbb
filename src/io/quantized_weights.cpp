#include "io/quantized_weights.h"

#include <algorithm>
#include <cstring>

namespace lockstep {

namespace {

Error part_error(const TensorInfo& info, const std::string& what) {
  return make_error(info.file + ": tensor '" + info.name + "' " + what);
}

// Copies row r of each part into one stored row: the values, then the scales, then the biases.
std::vector<std::byte> stored_rows(int64_t rows, const std::vector<std::pair<const TensorInfo*, size_t>>& parts) {
  size_t row_bytes = 0;
  for (const auto& [info, bytes] : parts) row_bytes += bytes;
  std::vector<std::byte> out(size_t(rows) * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    std::byte* at = out.data() + size_t(r) * row_bytes;
    for (const auto& [info, bytes] : parts) {
      std::memcpy(at, static_cast<const std::byte*>(info->data) + size_t(r) * bytes, bytes);
      at += bytes;
    }
  }
  return out;
}

// Whether `part` has the leading dimensions of `expected` (all but the last).
bool same_lead(const Shape& part, const Shape& expected) {
  if (part.rank != expected.rank) return false;
  for (int i = 0; i + 1 < expected.rank; ++i)
    if (part[i] != expected[i]) return false;
  return true;
}

// MLX affine: weight uint32 [lead..., k * bits / 32], scales and biases [lead..., k / group]; lead
// is the rows, or experts and rows for a stack of experts (mlx-lm's switch_mlp).
Expected<QuantizedWeight> affine(const TensorInfo& words, const TensorInfo& scales, const TensorInfo& biases,
                                 const Shape& expected) {
  const int last = expected.rank - 1;
  const int64_t k = expected[last], rows = expected.numel() / std::max<int64_t>(k, 1);
  if (words.dtype != DType::u32 || !same_lead(words.shape, expected))
    return part_error(words, "is not uint32 words of " + std::to_string(rows) + " rows (an MLX quantized weight of " +
                                 expected.to_string() + ")");
  if (!same_lead(scales.shape, expected) || !(biases.shape == scales.shape) || biases.dtype != scales.dtype ||
      scales.shape[last] <= 0 || k % scales.shape[last] != 0)
    return part_error(scales, "and its biases do not give a group size for rows of " + std::to_string(k) + " values");
  const int64_t bits = words.shape[last] * 32 / k;
  QuantLayout layout{QuantFormat::mlx_affine, int(k / scales.shape[last]), int(bits), scales.dtype};
  if (words.shape[last] * 32 != bits * k) return part_error(words, "has a word count no bit width gives");
  Status valid = check_layout(layout);
  if (!valid.ok()) return part_error(words, "is not a layout lockstep reads: " + valid.message());
  Expected<RowBytes> bytes = quant_row_bytes(layout, size_t(k));
  if (!bytes.ok()) return part_error(words, bytes.error().message);
  return QuantizedWeight{layout, expected,
                         stored_rows(rows, {{&words, bytes->values}, {&scales, bytes->scales}, {&biases, bytes->biases}})};
}

// FP8 with 2-D blocks: weight e4m3 [rows, k], scale_inv f32 [ceil(rows / b), k / b]; row r's
// scales are row r / b of scale_inv.
Expected<QuantizedWeight> fp8_blocks(const TensorInfo& codes, const TensorInfo& scale_inv, const Shape& expected) {
  const int64_t rows = expected[0], k = expected[1];
  if (scale_inv.dtype != DType::f32 || scale_inv.shape.rank != 2)
    return part_error(scale_inv, "is not a 2-D f32 tensor of block scales");
  int block = 0;
  for (int b : {128, 64, 32})
    if (k % b == 0 && scale_inv.shape[1] == k / b && scale_inv.shape[0] == (rows + b - 1) / b) block = b;
  if (block == 0)
    return part_error(scale_inv, "has shape " + scale_inv.shape.to_string() + ": not square blocks of 128, 64 or 32 over " +
                                     expected.to_string());
  QuantLayout layout{QuantFormat::fp8_e4m3, block, 0, DType::f32};
  const size_t row_scales = size_t(k / block) * 4;
  std::vector<std::byte> out(size_t(rows) * (size_t(k) + row_scales));
  for (int64_t r = 0; r < rows; ++r) {
    std::byte* at = out.data() + size_t(r) * (size_t(k) + row_scales);
    std::memcpy(at, static_cast<const std::byte*>(codes.data) + size_t(r * k), size_t(k));
    std::memcpy(at + k, static_cast<const std::byte*>(scale_inv.data) + size_t(r / block) * row_scales, row_scales);
  }
  return QuantizedWeight{layout, expected, std::move(out)};
}

// FP8 with one scale for the tensor: stored as blocks of the row that each repeat that scale
// (the values are code * scale either way), so a row stays whole on its own.
Expected<QuantizedWeight> fp8_tensor(const TensorInfo& codes, const TensorInfo& scale, const Shape& expected) {
  const int64_t rows = expected[0], k = expected[1];
  if (scale.dtype != DType::f32 || scale.shape.numel() != 1)
    return part_error(scale, "is not one f32 scale (FP8 per tensor)");
  int block = 0;
  for (int b : {32, 64, 128})
    if (k % b == 0) block = b;
  if (block == 0) return part_error(codes, "has rows of " + std::to_string(k) + " values, not whole blocks of 32");
  QuantLayout layout{QuantFormat::fp8_e4m3, block, 0, DType::f32};
  const int64_t blocks = k / block;
  const size_t row_bytes = size_t(k + blocks * 4);
  std::vector<std::byte> out(size_t(rows) * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    std::byte* at = out.data() + size_t(r) * row_bytes;
    std::memcpy(at, static_cast<const std::byte*>(codes.data) + size_t(r * k), size_t(k));
    for (int64_t b = 0; b < blocks; ++b) std::memcpy(at + k + b * 4, scale.data, 4);
  }
  return QuantizedWeight{layout, expected, std::move(out)};
}

}  // namespace

Expected<std::optional<QuantizedWeight>> read_quantized(const WeightSource& weights, const std::string& name,
                                                        const Shape& expected) {
  const std::string suffix = ".weight";
  if (expected.rank < 2 || expected.rank > 3 || name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::optional<QuantizedWeight>{};
  const std::string base = name.substr(0, name.size() - suffix.size());
  auto part = [&](const std::string& part_name) -> Expected<TensorInfo> { return weights.find(part_name); };
  Expected<QuantizedWeight> found = make_error("");
  if (weights.has(base + ".scales")) {
    auto words = part(name), scales = part(base + ".scales"), biases = part(base + ".biases");
    if (!words.ok()) return words.error();
    if (!scales.ok()) return scales.error();
    if (!biases.ok()) return make_error("tensor '" + base + ".scales' has no '" + base + ".biases' beside it (MLX affine)");
    found = affine(*words, *scales, *biases, expected);
  } else if (expected.rank == 2 && (weights.has(name + "_scale_inv") || weights.has(base + ".weight_scale"))) {
    auto codes = part(name);
    if (!codes.ok()) return codes.error();
    if (codes->dtype != DType::f8_e4m3 || !(codes->shape == expected))
      return part_error(*codes, "has dtype " + std::string(dtype_name(codes->dtype)) + " and shape " +
                                    codes->shape.to_string() + ", expected f8_e4m3 " + expected.to_string());
    if (weights.has(name + "_scale_inv")) {
      auto scale_inv = part(name + "_scale_inv");
      if (!scale_inv.ok()) return scale_inv.error();
      found = fp8_blocks(*codes, *scale_inv, expected);
    } else {
      auto scale = part(base + ".weight_scale");
      if (!scale.ok()) return scale.error();
      found = fp8_tensor(*codes, *scale, expected);
    }
  } else {
    return std::optional<QuantizedWeight>{};
  }
  if (!found.ok()) return found.error();
  return std::optional<QuantizedWeight>{std::move(*found)};
}

Expected<std::optional<QuantizedWeight>> WeightSource::quantized(const std::string& name,
                                                                const Shape& expected) const {
  return read_quantized(*this, name, expected);
}

std::vector<float> dequantized_values(const QuantizedWeight& weight) {
  const int64_t k = weight.shape[weight.shape.rank - 1], rows = weight.shape.numel() / std::max<int64_t>(k, 1);
  const size_t row_bytes = quant_row_total(weight.layout, k);
  std::vector<float> values(size_t(rows * k));
  for (int64_t r = 0; r < rows; ++r)
    dequantize_stored_row(weight.layout, weight.rows.data() + size_t(r) * row_bytes, k, values.data() + r * k);
  return values;
}

}  // namespace lockstep
