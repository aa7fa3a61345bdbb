// A GGUF model file (or the files of a split: NAME-00001-of-00003.gguf ...) as lockstep loads it:
// its tensors under the Hugging Face names the model families ask for (gguf_names.h), and its
// metadata as the config.json those families read. Llama, Qwen3 and Nemotron-H (llama.cpp's
// "llama", "qwen3", "nemotron_h" and "nemotron_h_moe"); llama.cpp's converter interleaves the
// rows of Llama's and Nemotron-H's q and k projections for its rotary layout and stores
// Nemotron-H's A as -exp(A_log), which is undone here. F32, F16 and BF16 tensors load as they
// are; Q8_0, Q4_0, Q4_K, Q5_K and Q6_K stay quantized (quantized(), matrices and stacks of
// experts); other ggml types are refused by name.
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
  // Whether the converter interleaved the q and k rows of each head (Llama, Nemotron-H), and
  // whether `name` is such a q or k projection.
  bool permutes_qk() const;
  bool permuted(const std::string& name) const;
  // The rows of a q or k projection in Hugging Face's order (copied once, then kept).
  const std::vector<std::byte>& unpermuted(const std::string& name, const GgufTensor& tensor, size_t row_bytes) const;
  // Nemotron-H's A_log from the stored A = -exp(A_log) (computed once, then kept).
  const std::vector<std::byte>& a_log(const std::string& name, const GgufTensor& tensor) const;
  // The metadata integer ARCH.key, which must be positive, or an error naming it.
  [[nodiscard]] Expected<int64_t> positive(const std::string& key) const;
  // config() for each family (gguf_config.cpp).
  [[nodiscard]] Expected<nlohmann::json> llama_config() const;
  [[nodiscard]] Expected<nlohmann::json> nemotron_config() const;
  // The end and start ids the file names (and the CONTROL tokens llama.cpp also ends at).
  void add_special_ids(nlohmann::json& config) const;

  std::vector<std::unique_ptr<GgufFile>> files_;
  std::string architecture_;
  std::map<std::string, const GgufTensor*> by_hf_name_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::vector<std::byte>> derived_;  // unpermuted() and a_log()
};

// Whether `path` names a GGUF file (ends in .gguf).
bool is_gguf_path(const std::string& path);

}  // namespace lockstep
