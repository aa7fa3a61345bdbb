#include "models/weight_upload.h"

#include <algorithm>
#include <cstring>
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

// The values of a tensor of 16-bit floats (bf16 or f16) as f32.
std::vector<float> to_f32(const TensorInfo& info) {
  const int64_t n = info.shape.numel();
  std::vector<float> converted(static_cast<size_t>(n));
  const auto* words = static_cast<const uint16_t*>(info.data);
  for (int64_t i = 0; i < n; ++i)
    converted[size_t(i)] = info.dtype == DType::bf16 ? bf16_to_f32(words[i]) : f16_to_f32(words[i]);
  return converted;
}

// Copies `info` into `dst` (backend memory of dst.dtype), converting 16-bit floats to f32.
void upload_into(Backend& backend, const TensorInfo& info, const Tensor& dst) {
  if (info.dtype == dst.dtype) backend.upload(dst, info.data);
  else backend.upload(dst, to_f32(info).data());
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

Expected<OwnedTensor> upload_columns(const WeightSource& weights, Backend& backend, const std::string& name,
                                     const Shape& shape, int64_t begin, int64_t count, WeightUse use) {
  auto info = weights.get(name, shape);
  if (!info.ok()) return info.error();
  const int64_t rows = shape[0], cols = shape[1];
  const size_t element = info->bytes / size_t(rows * cols);
  std::vector<std::byte> part(size_t(rows * count) * element);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(part.data() + size_t(r * count) * element,
                static_cast<const std::byte*>(info->data) + size_t(r * cols + begin) * element, size_t(count) * element);
  TensorInfo columns = *info;
  columns.shape = {rows, count};
  columns.data = part.data();
  columns.bytes = part.size();
  OwnedTensor tensor = backend.alloc(target_dtype(info->dtype, use), columns.shape);
  upload_into(backend, columns, tensor);
  return loaded(backend, std::move(tensor), use);
}

Expected<OwnedTensor> upload_experts(const WeightSource& weights, Backend& backend, const ExpertNames& names,
                                     const Shape& shape, int cut, WeightUse use) {
  const int64_t extra = shared_expert_count(names.shared_size, shape[cut]);
  Shape all;
  all.rank = shape.rank + 1;
  all.dims[0] = names.experts + extra;
  for (int i = 0; i < shape.rank; ++i) all.dims[i + 1] = shape[i];
  OwnedTensor tensor;
  // Allocates the stack at the first tensor's dtype; every other must give the same.
  auto check_dtype = [&](const TensorInfo& info, const std::string& name) -> Status {
    const DType target = target_dtype(info.dtype, use);
    if (tensor.empty()) tensor = backend.alloc(target, all);
    if (target != tensor.view().dtype) return make_error("tensor '" + name + "' has another dtype than the experts'");
    return Status::success();
  };
  auto expert = [&](int64_t e) { return tensor.view().first_dim_slice(e, 1).reshaped(shape); };
  if (names.stacked) {
    Shape stacked = all;
    stacked.dims[0] = names.experts;
    auto info = weights.get(names.routed.at(0), stacked);
    if (!info.ok()) return info.error();
    LOCKSTEP_TRY(check_dtype(*info, names.routed[0]));
    upload_into(backend, *info, tensor.view().first_dim_slice(0, names.experts));
  } else {
    for (int64_t e = 0; e < names.experts; ++e) {
      auto info = weights.get(names.routed.at(size_t(e)), shape);
      if (!info.ok()) return info.error();
      LOCKSTEP_TRY(check_dtype(*info, names.routed[size_t(e)]));
      upload_into(backend, *info, expert(e));
    }
  }
  // The shared expert, converted as upload_into would, then cut into pieces of `shape`.
  Shape shared_shape = shape;
  shared_shape.dims[cut] = names.shared_size;
  auto info = weights.get(names.shared, shared_shape);
  if (!info.ok()) return info.error();
  LOCKSTEP_TRY(check_dtype(*info, names.shared));
  const DType dtype = tensor.view().dtype;
  const size_t size = dtype_size(dtype);
  std::vector<float> converted;
  if (info->dtype != dtype) converted = to_f32(*info);
  const auto* source = static_cast<const uint8_t*>(converted.empty() ? info->data : converted.data());
  const int64_t rows = shape[0], cols = shape[1], width = shape[cut];
  const int64_t shared_cols = shared_shape[1];
  std::vector<uint8_t> piece(size_t(rows * cols) * size);
  for (int64_t i = 0; i < extra; ++i) {
    std::fill(piece.begin(), piece.end(), uint8_t(0));
    const int64_t first = i * width, count = std::min(width, names.shared_size - first);
    if (cut == 0) {
      std::memcpy(piece.data(), source + size_t(first * cols) * size, size_t(count * cols) * size);
    } else {
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(piece.data() + size_t(r * cols) * size, source + size_t(r * shared_cols + first) * size,
                    size_t(count) * size);
    }
    backend.upload(expert(names.experts + i), piece.data());
  }
  return loaded(backend, std::move(tensor), use);
}

}  // namespace lockstep
