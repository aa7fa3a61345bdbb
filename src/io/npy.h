// NumPy .npy files of float32, for dumping activations and logits to compare with Python
// (numpy.load reads them). Format:
// https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tensor/tensor.h"

namespace lockstep {

// Writes shape.numel() floats from `data` (row-major) to `path` as NPY version 1.0,
// dtype '<f4', fortran_order False, the header padded with spaces to a 64-byte boundary and
// ending in '\n'. Replaces any file there. Fails naming the path on a negative dimension,
// null data for a non-empty shape, or an I/O error (and then removes the partial file).
[[nodiscard]] Status write_npy_f32(const std::string& path, const float* data, const Shape& shape);

// Reads a C-order '<f4' .npy file (versions 1.0 to 3.0) of rank at most kMaxRank.
// Fails naming the path on anything else, or on a data size that does not match the shape.
[[nodiscard]] Expected<std::pair<Shape, std::vector<float>>> read_npy_f32(const std::string& path);

}  // namespace lockstep
