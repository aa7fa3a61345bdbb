// Where model weights come from: a Hugging Face checkpoint folder on disk, or tensors in
// memory. Model code asks for each weight by name and expected shape through WeightSource.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "io/safetensors.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "tensor/tensor.h"

namespace lockstep {

// A weight its source holds quantized, as stored rows (tensor/quant_tensor.h), ready to upload.
struct QuantizedWeight {
  QuantLayout layout;
  Shape shape;                  // what it stands for: [rows, k], or a stack of experts [experts, rows, k]
  std::vector<std::byte> rows;  // quant_row_total(layout, k) bytes a row
};

// Where a model family reads its weights from. Model code asks by name and expected shape.
// The TensorInfo::data of a result stays valid as long as the source does (and, for
// MemoryWeights, until that name is added again). Const methods are safe from several threads.
class WeightSource {
 public:
  virtual ~WeightSource() = default;

  virtual bool has(const std::string& name) const = 0;
  // The tensor called `name`; error: "missing tensor 'X' in <dir or file>".
  [[nodiscard]] virtual Expected<TensorInfo> find(const std::string& name) const = 0;
  // Every tensor name, sorted: for tools, and for checks that no weight went unused.
  virtual std::vector<std::string> names() const = 0;

  // find(), then checks the dtype is f32, bf16 or f16 and the shape equals `expected`;
  // errors name the file, the tensor, and the expected and actual dtype or shape.
  [[nodiscard]] virtual Expected<TensorInfo> get(const std::string& name, const Shape& expected) const;

  // nullopt when `name` of shape `expected` is stored plain (get() reads it); its stored rows
  // when the source holds it quantized; an error naming the tensor when that fails. By default,
  // MLX affine and FP8 parts beside it (io/quantized_weights.h).
  [[nodiscard]] virtual Expected<std::optional<QuantizedWeight>> quantized(const std::string& name,
                                                                          const Shape& expected) const;

  // How the model stores the matrices it takes from here (embeddings and matmul weights, not
  // norms or MoE routers): as this source holds them
  // (nullopt), or quantized to a layout row by row as each loads (`--quantize`; read by
  // models/weight_upload.h). Set before the model loads.
  void set_matmul_quantization(std::optional<QuantLayout> layout) { matmul_quantization_ = layout; }
  const std::optional<QuantLayout>& matmul_quantization() const { return matmul_quantization_; }

 private:
  std::optional<QuantLayout> matmul_quantization_;
};

// A Hugging Face model folder: model.safetensors, or model.safetensors.index.json
// ({"weight_map": {tensor name: shard file name}}) with its shards beside it. If both exist,
// model.safetensors is read, as transformers does. Every file stays memory-mapped for the
// life of the Checkpoint; nothing is copied.
class Checkpoint : public WeightSource {
 public:
  // Opens and validates every file (see SafetensorsFile::open). For a sharded folder, the
  // weight_map is the list of tensors: each one must be in the shard it names (tensors a shard
  // holds but the map omits are not visible), and shard names must stay inside the folder.
  // Fails with a one-line error naming the folder, index or shard, and tensor at fault.
  [[nodiscard]] static Expected<std::unique_ptr<Checkpoint>> open(const std::string& dir);

  bool has(const std::string& name) const override;
  [[nodiscard]] Expected<TensorInfo> find(const std::string& name) const override;
  std::vector<std::string> names() const override;

  const std::string& dir() const { return dir_; }
  // The file that lists the tensors: model.safetensors or model.safetensors.index.json.
  const std::string& source() const { return source_; }

 private:
  Checkpoint(std::string dir, std::string source)
      : dir_(std::move(dir)), source_(std::move(source)) {}
  [[nodiscard]] Status open_sharded();

  std::string dir_;
  std::string source_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorInfo> tensors_;  // data points into files_
};

// A WeightSource of tensors held in memory (tests, benchmarks with random weights).
// Not safe to add() while another thread reads.
class MemoryWeights : public WeightSource {
 public:
  // `label` stands for the file in error messages.
  explicit MemoryWeights(std::string label = "memory weights") : label_(std::move(label)) {}

  // Adds `name`, replacing any tensor of that name (whose data pointers then dangle).
  // Requires bytes.size() == shape.numel() * dtype_size(dtype) (asserted).
  void add(std::string name, DType dtype, Shape shape, std::vector<uint8_t> bytes);

  bool has(const std::string& name) const override;
  [[nodiscard]] Expected<TensorInfo> find(const std::string& name) const override;
  std::vector<std::string> names() const override;

 private:
  struct Entry {
    TensorInfo info;  // data points into bytes
    std::vector<uint8_t> bytes;
  };
  std::string label_;
  std::map<std::string, Entry> entries_;
};

}  // namespace lockstep
