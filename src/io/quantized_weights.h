// Weights that a checkpoint holds quantized: MLX affine (mlx-lm's layout: `X.weight` uint32
// words, `X.scales` and `X.biases` beside it) and FP8 e4m3 (block-wise: `X.weight_scale_inv`,
// as `quant_method: fp8` checkpoints with `weight_block_size` have it; per tensor:
// `X.weight_scale`, NVIDIA ModelOpt's). The layout is read off the parts' shapes and the shape
// the model expects, so per-module overrides (another bits or group for one layer) need nothing
// more.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/checkpoint.h"
#include "tensor/quant_tensor.h"

namespace lockstep {

// WeightSource::quantized's reading for safetensors checkpoints, by the parts beside `name`:
// nullopt when `name` (a "....weight" of 2 dimensions) is stored plain; its stored rows when it
// is stored quantized; an error, naming the tensor, when its parts do not make a layout of
// `expected` ([rows, k]).
[[nodiscard]] Expected<std::optional<QuantizedWeight>> read_quantized(const WeightSource& weights,
                                                                      const std::string& name,
                                                                      const Shape& expected);

// The f32 values of a quantized weight, row-major [rows, k].
std::vector<float> dequantized_values(const QuantizedWeight& weight);

}  // namespace lockstep
