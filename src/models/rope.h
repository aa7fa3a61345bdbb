// Rotary position tables, computed once per model in double precision.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "base/status.h"

namespace lockstep {

struct RopeSettings {
  double theta = 10000.0;
  // default, linear, llama3, or frequency_divisors: each pair's frequency divided by its own
  // divisor (a GGUF file's rope_freqs tensor, which llama.cpp's converter writes for Llama 3's
  // scaling), head_dim / 2 of them.
  std::string type = "default";
  std::vector<double> divisors;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_positions = 8192.0;
};

// Reads rope_theta/rope_scaling (older configs) or rope_parameters (transformers 5).
[[nodiscard]] Expected<RopeSettings> parse_rope(const nlohmann::json& config);

// The inverse frequencies of head_dim / 2 rotary pairs, after the scaling rule.
std::vector<double> rope_inverse_frequencies(const RopeSettings& rope, int64_t head_dim);

// f32 [max_positions, head_dim]: row p holds cos(p * f_i) then sin(p * f_i).
std::vector<float> rope_cos_sin_table(const RopeSettings& rope, int64_t head_dim, int64_t max_positions);

}  // namespace lockstep
