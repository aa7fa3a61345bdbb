// Copies checkpoint tensors into backend memory in the layout the kernels want.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/checkpoint.h"
#include "tensor/quant_tensor.h"

namespace lockstep {

enum class WeightUse {
  matrix,  // an embedding table (tied: the head's matmul reads it too; quantized as matmul is):
           // f32 and bf16 stay as
           // stored, f16 becomes f32
  matmul,  // a weight only matmuls read: as matrix (or quantized, when the source asks for
           // it: WeightSource::matmul_quantization), then Backend::prepare_matmul_weight
  router,  // a MoE router: as matmul, never quantized (routing stays the checkpoint's)
  vector,  // norm weights, biases: always f32
};

// layout_for_rows (the layout a matrix takes under --quantize) is in tensor/quant_tensor.h.

// Reads `name`, checks its shape, converts it for `use` and uploads it.
[[nodiscard]] Expected<OwnedTensor> upload_weight(const WeightSource& weights, Backend& backend, const std::string& name,
                                                  const Shape& shape, WeightUse use);

// Uploads tensors `names`, each [rows, shape's columns...] with its own row count, as one tensor
// of their rows in order (a layer's q, k and v projections, read by one matmul). The stored
// dtype of the first decides.
[[nodiscard]] Expected<OwnedTensor> upload_concatenated(const WeightSource& weights, Backend& backend,
                                                        const std::vector<std::string>& names,
                                                        const std::vector<Shape>& shapes, WeightUse use);

// Uploads columns [begin, begin + count) of the 2-D tensor `name` of `shape` (one matmul's
// weight out of a wider one: the MTP head's eh_proj, split where its input is concatenated).
[[nodiscard]] Expected<OwnedTensor> upload_columns(const WeightSource& weights, Backend& backend,
                                                   const std::string& name, const Shape& shape, int64_t begin,
                                                   int64_t count, WeightUse use);

// Uploads rows [begin, begin + count) of the 2-D tensor `name` of `shape`, or elements of the
// 1-D one (a tensor-parallel rank's share of a column-parallel weight or of its bias).
[[nodiscard]] Expected<OwnedTensor> upload_rows(const WeightSource& weights, Backend& backend, const std::string& name,
                                                const Shape& shape, int64_t begin, int64_t count, WeightUse use);

// Rows [begin, begin + count) of tensor `name` of `shape` (along its first dimension; a 1-D
// tensor's elements).
struct RowPiece {
  std::string name;
  Shape shape;
  int64_t begin = 0, count = 0;
};
// Uploads `pieces`' rows one after another as one tensor (a tensor-parallel rank's share of a
// projection whose output is several parts, each split among the ranks: Mamba2's in_proj, the
// q, k and v rows of one tensor). Quantized pieces of one layout stay quantized; mixed ones load
// as their f32 values. The stored dtype of the first decides.
[[nodiscard]] Expected<OwnedTensor> upload_row_pieces(const WeightSource& weights, Backend& backend,
                                                      const std::vector<RowPiece>& pieces, WeightUse use);

// A MoE layer's up or down projections as one stack [experts + extra, shape...] for
// Backend::moe_experts: the routed experts (one name each, or with `stacked` one name of all of
// them), then the shared expert `shared`, whose size along dimension `cut` (0: rows, for up
// projections; 1: columns, for down projections) is `shared_size`, cut along it into `extra` =
// ceil(shared_size / shape[cut]) experts of `shape`, zeros past its end (which add exact zeros
// to the sums: relu2(0) = 0). Every tensor must give the stack's dtype.
// With `ranks` > 1, the stack is tensor-parallel rank `rank`'s share of each expert's width:
// `shape` is a rank's expert, whose stored size along `cut` is ranks x shape[cut]; the rank takes
// the width [rank x shape[cut], + shape[cut]) of each routed expert, and its share
// shared_size / ranks of the shared expert, cut into experts as above.
struct ExpertNames {
  std::vector<std::string> routed;
  bool stacked = false;
  int64_t experts = 0;
  std::string shared;
  int64_t shared_size = 0;
  int64_t rank = 0, ranks = 1;
};
[[nodiscard]] Expected<OwnedTensor> upload_experts(const WeightSource& weights, Backend& backend,
                                                   const ExpertNames& names, const Shape& shape, int cut,
                                                   WeightUse use);

// How many experts a shared expert of `shared_size` makes at the routed experts' `width`.
inline int64_t shared_expert_count(int64_t shared_size, int64_t width) { return (shared_size + width - 1) / width; }

}  // namespace lockstep
