#include "models/weight_upload.h"

#include <vector>

namespace lockstep {

Expected<OwnedTensor> upload_weight(const WeightSource& weights, Backend& backend, const std::string& name,
                                    const Shape& shape, WeightUse use) {
  auto info = weights.get(name, shape);
  if (!info.ok()) return info.error();
  DType stored = info->dtype;
  DType target = (use == WeightUse::matrix && stored == DType::bf16) ? DType::bf16 : DType::f32;
  OwnedTensor tensor = backend.alloc(target, shape);
  if (stored == target) {
    backend.upload(tensor, info->data);
    return tensor;
  }
  const int64_t n = shape.numel();
  std::vector<float> converted(size_t(n), 0.0f);
  const auto* words = static_cast<const uint16_t*>(info->data);
  for (int64_t i = 0; i < n; ++i) converted[size_t(i)] = stored == DType::bf16 ? bf16_to_f32(words[i]) : f16_to_f32(words[i]);
  backend.upload(tensor, converted.data());
  return tensor;
}

}  // namespace lockstep
