// Reading .safetensors files: an 8-byte little-endian header length, a JSON header that maps
// each tensor name to {dtype, shape, data_offsets}, then the tensor bytes.
// https://github.com/huggingface/safetensors (format description in its README).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "base/status.h"
#include "io/mapped_file.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace lockstep {

// One tensor as stored in a file. `data` points at `bytes` bytes of row-major elements inside
// memory that the file's owner (SafetensorsFile, Checkpoint, MemoryWeights) keeps alive; it is
// aligned to the element size whenever the writer aligned its data section to 8 bytes, as the
// reference writer and write_safetensors do. `file` names where it came from, for messages.
struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  const void* data = nullptr;
  size_t bytes = 0;
  std::string file;
};

// One memory-mapped .safetensors file, read-only. The mapping lives as long as this object;
// every TensorInfo::data points into it. Non-copyable and non-movable (pointers into it are
// handed out); own it through the unique_ptr that open() returns. Const methods are safe to
// call from several threads. The file must not be truncated while mapped (that is SIGBUS).
class SafetensorsFile {
 public:
  // Maps `path` and validates the whole header: every entry's dtype, shape and offsets, that
  // each tensor's byte size matches its shape, and that no two tensors overlap. Fails with a
  // one-line error naming the file (and the tensor, where one is at fault); never throws.
  // The "__metadata__" entry is skipped. Tensors whose dtype lockstep lacks (F64, F8_E5M2, ...) fail.
  [[nodiscard]] static Expected<std::unique_ptr<SafetensorsFile>> open(const std::string& path);

  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // Every tensor in the file, by name.
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::string& path() const { return path_; }

 private:
  explicit SafetensorsFile(std::unique_ptr<MappedFile> file) : file_(std::move(file)) {}
  // Fills tensors_ from the mapped header, or explains what is wrong with it.
  [[nodiscard]] Status parse_header();

  std::unique_ptr<MappedFile> file_;
  std::string path_;
  std::map<std::string, TensorInfo> tensors_;
};

}  // namespace lockstep
