// Copies checkpoint tensors into backend memory in the layout the kernels want.
#pragma once

#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/checkpoint.h"

namespace lockstep {

enum class WeightUse {
  matrix,  // an embedding table (tied: the head's matmul reads it too): f32 and bf16 stay as
           // stored, f16 becomes f32
  matmul,  // a weight only matmuls read: as matrix, then Backend::prepare_matmul_weight
  vector,  // norm weights, biases: always f32
};

// Reads `name`, checks its shape, converts it for `use` and uploads it.
[[nodiscard]] Expected<OwnedTensor> upload_weight(const WeightSource& weights, Backend& backend, const std::string& name,
                                                  const Shape& shape, WeightUse use);

// Uploads same-shaped tensors `names` as one stacked tensor [names.size(), shape...] (MoE
// experts). The stored dtype of the first decides the stack's, as in upload_weight.
[[nodiscard]] Expected<OwnedTensor> upload_stacked(const WeightSource& weights, Backend& backend,
                                                   const std::vector<std::string>& names, const Shape& shape,
                                                   WeightUse use);

// Uploads tensors `names`, each [rows, shape's columns...] with its own row count, as one tensor
// of their rows in order (a layer's q, k and v projections, read by one matmul). The stored
// dtype of the first decides, as in upload_stacked.
[[nodiscard]] Expected<OwnedTensor> upload_concatenated(const WeightSource& weights, Backend& backend,
                                                        const std::vector<std::string>& names,
                                                        const std::vector<Shape>& shapes, WeightUse use);

}  // namespace lockstep
