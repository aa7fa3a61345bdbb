// Writing .safetensors files: for tools (converters, reference dumps) and for tests that need
// small checkpoints. The output is what SafetensorsFile::open and the Python library read.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace lockstep {

// One tensor to write. `data` points at shape.numel() * dtype_size(dtype) bytes that the
// caller keeps alive for the duration of the write; it may be null for an empty tensor.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  const void* data = nullptr;
};

// Writes `tensors` (and optional string `metadata` as "__metadata__") to `path`, replacing any
// file there. The header is padded with spaces so the data section starts 8-byte aligned, and
// tensors are laid out widest dtype first so each one is aligned to its element size.
// Fails, writing nothing, on an empty or duplicate name, "__metadata__" as a tensor name, a
// name or metadata that is not UTF-8, a negative dimension, or null data for a non-empty
// tensor; fails naming the path, and removes the partial file, if the file cannot be written.
[[nodiscard]] Status write_safetensors(const std::string& path,
                                       const std::vector<TensorToWrite>& tensors,
                                       const std::map<std::string, std::string>& metadata = {});

}  // namespace lockstep
