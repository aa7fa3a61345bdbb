// Tensor: a typed, row-major, contiguous view of memory that a backend owns (host memory on
// the CPU, device memory on CUDA). A view never owns; OwnedTensor (backend/backend.h) does.
#pragma once

#include <array>
#include <cassert>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "tensor/dtype.h"
#include "tensor/quant_layout.h"

namespace lockstep {

constexpr int kMaxRank = 4;

struct Shape {
  std::array<int64_t, kMaxRank> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> list) {
    assert(list.size() <= kMaxRank);
    for (int64_t d : list) dims[rank++] = d;
  }
  int64_t operator[](int i) const { return dims[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  bool operator==(const Shape& other) const {
    if (rank != other.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (dims[i] != other.dims[i]) return false;
    return true;
  }
  std::string to_string() const;
};

struct Tensor {
  Tensor() = default;
  Tensor(void* data, DType dtype, Shape shape) : data(data), dtype(dtype), shape(shape) {}
  // A tensor of DType::quant: rows of `layout` (see `quant` below).
  static Tensor quantized(const QuantLayout& layout, Shape shape, void* data = nullptr) {
    Tensor view(data, DType::quant, shape);
    view.quant = layout;
    return view;
  }

  void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
  // With DType::quant: the format of each row of the last dimension, stored as its parts one
  // after another (quant_row_bytes: the values, then the scales, then the biases), row by row.
  QuantLayout quant;

  int64_t numel() const { return shape.numel(); }
  size_t bytes() const {
    if (dtype == DType::quant) return size_t(rows()) * quant_row_total(quant, cols());
    return size_t(numel()) * dtype_size(dtype);
  }
  // Last dimension, and the product of the others: every op treats a tensor as rows.
  int64_t cols() const { return shape.rank ? shape[shape.rank - 1] : 1; }
  int64_t rows() const { return shape.rank ? numel() / cols() : 1; }

  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // Rows [begin, begin + count) along the first dimension.
  Tensor first_dim_slice(int64_t begin, int64_t count) const {
    Tensor out = *this;
    const int64_t stride = int64_t(bytes()) / shape[0];  // bytes per first-dimension index
    out.data = static_cast<char*>(data) + begin * stride;
    out.shape.dims[0] = count;
    return out;
  }
  // The same memory with another shape of equal size.
  Tensor reshaped(Shape new_shape) const {
    assert(new_shape.numel() == numel());
    Tensor out = *this;
    out.shape = new_shape;
    return out;
  }
};

}  // namespace lockstep
