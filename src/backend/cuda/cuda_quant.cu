// The host side of cuda_quant.cuh: which decoder reads a layout, and where a row's parts are.
#include "backend/cuda/cuda_quant.cuh"

namespace lockstep::cuda {

bool quant_kind_of(const QuantLayout& layout, QuantKind* kind) {
  switch (layout.format) {
    case QuantFormat::q8_0: *kind = QuantKind::q8_0; return true;
    case QuantFormat::q4_0: *kind = QuantKind::q4_0; return true;
    case QuantFormat::q4_1: *kind = QuantKind::q4_1; return true;
    case QuantFormat::q5_0: *kind = QuantKind::q5_0; return true;
    case QuantFormat::q5_1: *kind = QuantKind::q5_1; return true;
    case QuantFormat::iq4_nl: *kind = QuantKind::iq4_nl; return true;
    case QuantFormat::q4_k: *kind = QuantKind::q4_k; return true;
    case QuantFormat::q5_k: *kind = QuantKind::q5_k; return true;
    case QuantFormat::q6_k: *kind = QuantKind::q6_k; return true;
    case QuantFormat::fp8_e4m3: *kind = QuantKind::fp8; return layout.group == 32 || layout.group == 64 || layout.group == 128;
    case QuantFormat::mlx_affine:
      switch (layout.bits) {
        case 2: *kind = QuantKind::affine2; return true;
        case 3: *kind = QuantKind::affine3; return true;
        case 4: *kind = QuantKind::affine4; return true;
        case 5: *kind = QuantKind::affine5; return true;
        case 6: *kind = QuantKind::affine6; return true;
        case 8: *kind = QuantKind::affine8; return true;
        default: return false;
      }
  }
  return false;
}

QuantView quant_view(const void* data, const QuantLayout& layout, int64_t k) {
  QuantView view;
  view.data = static_cast<const uint8_t*>(data);
  view.row_bytes = quant_row_total(layout, k);
  for (int shift = 0; shift < 8; ++shift)
    if (layout.group == 1 << shift) view.group_shift = shift;
  view.scale_type = layout.scale_type;
  if (layout.format == QuantFormat::mlx_affine) {
    view.values_bytes = size_t(k) * size_t(layout.bits) / 8;
    view.scales_bytes = size_t(k / layout.group) * (layout.scale_type == DType::f32 ? 4 : 2);
  } else if (layout.format == QuantFormat::fp8_e4m3) {
    view.values_bytes = size_t(k);
  }
  return view;
}

}  // namespace lockstep::cuda
