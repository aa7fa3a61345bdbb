// GGUF files (llama.cpp's format, version 2 and 3): the metadata and the tensors of one file,
// mapped read-only. The whole header is checked at open, every count and offset against the
// file's size, so a broken or hostile file is one error naming the file and the fault.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/mapped_file.h"
#include "tensor/quant_layout.h"

namespace lockstep {

// ggml's tensor types that lockstep reads (others are refused by name when a model asks for them).
enum class GgmlType : uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q4_k = 12, q5_k = 13, q6_k = 14, iq4_nl = 20,
  bf16 = 30
};

struct GgufTensor {
  std::string name;
  uint32_t type = 0;           // ggml_type
  std::vector<int64_t> dims;   // ggml's order: dims[0] is a row's length (the innermost)
  const std::byte* data = nullptr;
  size_t bytes = 0;            // 0 for a type lockstep does not read
};

// The name of a ggml type ("Q4_K", "IQ2_XS", "type 99").
std::string ggml_type_name(uint32_t type);
// The block format of a quantized ggml type lockstep reads; nullopt for float types and others.
std::optional<QuantFormat> ggml_quant_format(uint32_t type);

// A metadata value as an integer or a number, if it is one; gguf_layer_integer also reads a
// per-layer array (llama.cpp writes head counts and widths that differ by layer as arrays).
std::optional<int64_t> gguf_integer(const nlohmann::json& metadata, const std::string& key);
std::optional<double> gguf_number(const nlohmann::json& metadata, const std::string& key);
std::optional<int64_t> gguf_layer_integer(const nlohmann::json& metadata, const std::string& key, int64_t layer);

class GgufFile {
 public:
  [[nodiscard]] static Expected<std::unique_ptr<GgufFile>> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  // Every metadata key, with its value as JSON (integers, floats, bools, strings, arrays).
  const nlohmann::json& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  // The whole file as mapped (the tensors' data points into it).
  const MappedFile& mapped() const { return *file_; }

 private:
  explicit GgufFile(std::unique_ptr<MappedFile> file) : file_(std::move(file)) {}
  [[nodiscard]] Status parse();

  std::unique_ptr<MappedFile> file_;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<GgufTensor> tensors_;
};

}  // namespace lockstep
