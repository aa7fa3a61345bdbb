// A GGUF model file (or the files of a split: NAME-00001-of-00003.gguf ...) as lockstep loads it:
// its tensors under the Hugging Face names the model families ask for, and its metadata as the
// config.json those families read. Llama and Qwen3 (llama.cpp's "llama" and "qwen3"); llama.cpp's
// converter interleaves the rows of Llama's q and k projections for its rotary layout, which is
// undone here. F32, F16 and BF16 tensors load as they are; Q8_0, Q4_0, Q4_K, Q5_K and Q6_K stay
// quantized (quantized()); other ggml types are refused by name.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "io/gguf_file.h"

namespace lockstep {

class GgufModel : public WeightSource {
 public:
  // Opens `path`, and every file of its split when its name says it is one.
  [[nodiscard]] static Expected<std::unique_ptr<GgufModel>> open(const std::string& path);

  // The first file's metadata (a split's other files carry only the split keys).
  const nlohmann::json& metadata() const { return files_.front()->metadata(); }
  // The config.json of the model (architectures, sizes, rope, end ids), from the metadata.
  [[nodiscard]] Expected<nlohmann::json> config() const;

  // The shape of the tensor a Hugging Face name stands for ([rows, k] for a matrix).
  std::optional<Shape> shape(const std::string& name) const;

  bool has(const std::string& name) const override;
  [[nodiscard]] Expected<TensorInfo> find(const std::string& name) const override;
  std::vector<std::string> names() const override;
  [[nodiscard]] Expected<std::optional<QuantizedWeight>> quantized(const std::string& name,
                                                                  const Shape& expected) const override;

 private:
  GgufModel() = default;
  // How many heads the rows of a Llama q or k projection `name` hold.
  int64_t heads_of(const std::string& name) const;
  // The tensor a Hugging Face name stands for, or null.
  const GgufTensor* tensor_for(const std::string& name) const;
  // The rows of a Llama q or k projection in Hugging Face's order (copied once, then kept).
  const std::vector<std::byte>& unpermuted(const std::string& name, const GgufTensor& tensor, size_t row_bytes) const;

  std::vector<std::unique_ptr<GgufFile>> files_;
  std::string architecture_;
  std::map<std::string, const GgufTensor*> by_hf_name_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::vector<std::byte>> unpermuted_;
};

// Whether `path` names a GGUF file (ends in .gguf).
bool is_gguf_path(const std::string& path);

}  // namespace lockstep
