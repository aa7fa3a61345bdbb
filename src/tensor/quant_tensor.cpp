#include "tensor/quant_tensor.h"

#include <cassert>

namespace lockstep {

namespace {

// The parts of one stored row of `sizes`, starting at `row`.
QuantRows parts_of(const std::byte* row, const RowBytes& sizes) {
  const auto* at = reinterpret_cast<const uint8_t*>(row);
  return {{at, sizes.values}, {at + sizes.values, sizes.scales}, {at + sizes.values + sizes.scales, sizes.biases}};
}

}  // namespace

std::optional<QuantLayout> quant_layout_named(std::string_view name) {
  if (name == "q8_0") return QuantLayout{QuantFormat::q8_0};
  if (name == "q4_0") return QuantLayout{QuantFormat::q4_0};
  if (name == "q4") return QuantLayout{QuantFormat::mlx_affine, 64, 4, DType::bf16};
  if (name == "fp8") return QuantLayout{QuantFormat::fp8_e4m3, 128, 0, DType::f32};
  // GGUF's K-quants and the other blocks of 32 have no quantizer here: dummy weights make them.
  if (name == "q4_k") return QuantLayout{QuantFormat::q4_k};
  if (name == "q5_k") return QuantLayout{QuantFormat::q5_k};
  if (name == "q6_k") return QuantLayout{QuantFormat::q6_k};
  if (name == "q4_1") return QuantLayout{QuantFormat::q4_1};
  if (name == "q5_0") return QuantLayout{QuantFormat::q5_0};
  if (name == "q5_1") return QuantLayout{QuantFormat::q5_1};
  if (name == "iq4_nl") return QuantLayout{QuantFormat::iq4_nl};
  return std::nullopt;
}

size_t quant_row_total(const QuantLayout& layout, int64_t n) {
  if (n <= 0) return 0;
  Expected<RowBytes> sizes = quant_row_bytes(layout, size_t(n));
  return sizes.ok() ? sizes->total() : 0;
}

std::string quant_layout_name(const QuantLayout& layout) {
  std::string name(quant_format_name(layout.format));
  switch (layout.format) {
    case QuantFormat::mlx_affine:
      return name + " " + std::to_string(layout.bits) + "-bit, groups of " + std::to_string(layout.group) + ", " +
             std::string(dtype_name(layout.scale_type)) + " scales";
    case QuantFormat::fp8_e4m3:
      return layout.group ? name + ", an f32 scale per " + std::to_string(layout.group) : name + ", one f32 scale";
    default: return name;
  }
}

void dequantize_stored_row(const QuantLayout& layout, const std::byte* row, int64_t n, float* out) {
  Expected<RowBytes> sizes = quant_row_bytes(layout, size_t(n));
  assert(sizes.ok());
  [[maybe_unused]] Status status = dequantize_row(layout, parts_of(row, *sizes), {out, size_t(n)});
  assert(status.ok());
}

Status quantize_stored_row(const QuantLayout& layout, const float* x, int64_t n, std::byte* row) {
  Expected<RowBytes> sizes = quant_row_bytes(layout, size_t(n));
  if (!sizes.ok()) return sizes.error();
  auto* at = reinterpret_cast<uint8_t*>(row);
  QuantRowsOut parts{{at, sizes->values}, {at + sizes->values, sizes->scales},
                     {at + sizes->values + sizes->scales, sizes->biases}};
  return quantize_rows(layout, size_t(n), {x, size_t(n)}, parts);
}

std::optional<QuantLayout> layout_for_rows(const QuantLayout& layout, int64_t k) {
  if (k > 0 && k % block_values(layout) == 0) return layout;
  if (layout.format != QuantFormat::mlx_affine && layout.format != QuantFormat::fp8_e4m3) return std::nullopt;
  for (int group : {64, 32}) {
    if (group >= layout.group || k % group != 0) continue;
    QuantLayout smaller = layout;
    smaller.group = group;
    return smaller;
  }
  return std::nullopt;
}

}  // namespace lockstep
