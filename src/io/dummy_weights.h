// Random weights made from the shapes a model asks for: for benchmarking an architecture
// without its checkpoint (like vLLM's load_format=dummy). Deterministic for a seed: each
// tensor's values depend only on the seed and the tensor's name.
//
// Scales follow the tensor's role, read from its name: norm weights and D are 1, A_log is
// log(1..heads), dt_bias gives dt near 0.01, other biases are 0, embeddings are uniform with
// std 0.02, and every other matrix is uniform with std 1/sqrt(inputs). Matrices are bf16, as
// released checkpoints are, or with --quantize random rows of its layout; vectors are f32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace lockstep {

class DummyWeights : public WeightSource {
 public:
  explicit DummyWeights(uint64_t seed = 0) : seed_(seed) {}

  bool has(const std::string&) const override { return true; }
  // Needs a shape: find() is an error; use get().
  [[nodiscard]] Expected<TensorInfo> find(const std::string& name) const override;
  std::vector<std::string> names() const override { return {}; }
  // Without --quantize none. With it (matmul_quantization()), each matrix --quantize would
  // quantize (rank 2, not a MoE router) comes as random rows of that layout, as fast as random
  // bytes: codes at random, scales that keep values near the plain weights' size (every
  // layout, GGUF's K-quants too, which nothing else can make).
  [[nodiscard]] Expected<std::optional<QuantizedWeight>> quantized(const std::string& name,
                                                                  const Shape& expected) const override;
  // Makes `name` with shape `expected`. The data stays valid until the next get(); not
  // thread-safe.
  [[nodiscard]] Expected<TensorInfo> get(const std::string& name, const Shape& expected) const override;

 private:
  uint64_t seed_;
  mutable std::vector<uint8_t> last_;  // the most recent tensor's bytes
};

}  // namespace lockstep
