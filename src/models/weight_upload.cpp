#include "models/weight_upload.h"

#include <vector>

namespace lockstep {

namespace {

DType target_dtype(DType stored, WeightUse use) {
  return (use != WeightUse::vector && stored == DType::bf16) ? DType::bf16 : DType::f32;
}

// A loaded tensor, prepared for the matmuls when that is its use.
Expected<OwnedTensor> loaded(Backend& backend, OwnedTensor tensor, WeightUse use) {
  if (use == WeightUse::matmul) backend.prepare_matmul_weight(tensor.view());
  return tensor;
}

// Copies `info` into `dst` (backend memory of dst.dtype), converting 16-bit floats to f32.
void upload_into(Backend& backend, const TensorInfo& info, const Tensor& dst) {
  if (info.dtype == dst.dtype) {
    backend.upload(dst, info.data);
    return;
  }
  const int64_t n = info.shape.numel();
  std::vector<float> converted(static_cast<size_t>(n));
  const auto* words = static_cast<const uint16_t*>(info.data);
  for (int64_t i = 0; i < n; ++i)
    converted[size_t(i)] = info.dtype == DType::bf16 ? bf16_to_f32(words[i]) : f16_to_f32(words[i]);
  backend.upload(dst, converted.data());
}

}  // namespace

Expected<OwnedTensor> upload_weight(const WeightSource& weights, Backend& backend, const std::string& name,
                                    const Shape& shape, WeightUse use) {
  auto info = weights.get(name, shape);
  if (!info.ok()) return info.error();
  OwnedTensor tensor = backend.alloc(target_dtype(info->dtype, use), shape);
  upload_into(backend, *info, tensor);
  return loaded(backend, std::move(tensor), use);
}

Expected<OwnedTensor> upload_stacked(const WeightSource& weights, Backend& backend,
                                     const std::vector<std::string>& names, const Shape& shape, WeightUse use) {
  Shape stacked;
  stacked.rank = shape.rank + 1;
  stacked.dims[0] = int64_t(names.size());
  for (int i = 0; i < shape.rank; ++i) stacked.dims[i + 1] = shape[i];
  OwnedTensor tensor;
  for (size_t i = 0; i < names.size(); ++i) {
    auto info = weights.get(names[i], shape);
    if (!info.ok()) return info.error();
    DType target = target_dtype(info->dtype, use);
    if (i == 0) tensor = backend.alloc(target, stacked);
    if (target != tensor.view().dtype)
      return make_error("tensor '" + names[i] + "' has another dtype than '" + names[0] + "'");
    upload_into(backend, *info, tensor.view().first_dim_slice(int64_t(i), 1).reshaped(shape));
  }
  return loaded(backend, std::move(tensor), use);
}

Expected<OwnedTensor> upload_concatenated(const WeightSource& weights, Backend& backend,
                                          const std::vector<std::string>& names, const std::vector<Shape>& shapes,
                                          WeightUse use) {
  Shape all = shapes.at(0);
  for (size_t i = 1; i < shapes.size(); ++i) all.dims[0] += shapes[i][0];
  OwnedTensor tensor;
  int64_t row = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    auto info = weights.get(names[i], shapes[i]);
    if (!info.ok()) return info.error();
    DType target = target_dtype(info->dtype, use);
    if (i == 0) tensor = backend.alloc(target, all);
    if (target != tensor.view().dtype)
      return make_error("tensor '" + names[i] + "' has another dtype than '" + names[0] + "'");
    upload_into(backend, *info, tensor.view().first_dim_slice(row, shapes[i][0]));
    row += shapes[i][0];
  }
  return loaded(backend, std::move(tensor), use);
}

}  // namespace lockstep
