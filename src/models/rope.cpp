#include "models/rope.h"

#include <cmath>

namespace lockstep {

Expected<RopeSettings> parse_rope(const nlohmann::json& config) {
  RopeSettings rope;
  const nlohmann::json* scaling = nullptr;
  if (auto it = config.find("rope_parameters"); it != config.end() && it->is_object()) scaling = &*it;
  if (auto it = config.find("rope_scaling"); it != config.end() && it->is_object()) scaling = &*it;
  auto number = [](const nlohmann::json& json, const char* key, double& out) {
    auto it = json.find(key);
    if (it != json.end() && it->is_number()) out = it->get<double>();
  };
  number(config, "rope_theta", rope.theta);
  if (scaling) {
    number(*scaling, "rope_theta", rope.theta);
    for (const char* key : {"rope_type", "type"}) {
      auto it = scaling->find(key);
      if (it != scaling->end() && it->is_string()) rope.type = it->get<std::string>();
    }
    number(*scaling, "factor", rope.factor);
    number(*scaling, "low_freq_factor", rope.low_freq_factor);
    number(*scaling, "high_freq_factor", rope.high_freq_factor);
    number(*scaling, "original_max_position_embeddings", rope.original_max_positions);
    if (auto it = scaling->find("divisors"); it != scaling->end() && it->is_array())
      for (const nlohmann::json& d : *it)
        rope.divisors.push_back(d.is_number() ? d.get<double>() : 0.0);
  }
  if (rope.type != "default" && rope.type != "linear" && rope.type != "llama3" && rope.type != "frequency_divisors")
    return make_error("unsupported rope type '" + rope.type + "' (supported: default, linear, llama3, and " +
                      "frequency_divisors from a GGUF file's rope_freqs)");
  if (rope.type == "frequency_divisors" && rope.divisors.empty())
    return make_error("rope type frequency_divisors needs its divisors");
  for (double d : rope.divisors)
    if (!(d > 0)) return make_error("rope frequency divisors must be positive");
  if (!(rope.theta > 0) || !(rope.factor > 0)) return make_error("rope_theta and the rope factor must be positive");
  if (rope.type == "llama3" && !(rope.high_freq_factor > rope.low_freq_factor))
    return make_error("llama3 rope needs high_freq_factor > low_freq_factor");
  return rope;
}

std::vector<double> rope_inverse_frequencies(const RopeSettings& rope, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  std::vector<double> inv(size_t(half), 0.0);
  for (int64_t i = 0; i < half; ++i) inv[size_t(i)] = 1.0 / std::pow(rope.theta, double(2 * i) / double(head_dim));
  if (rope.type == "linear") {
    for (double& f : inv) f /= rope.factor;
  } else if (rope.type == "frequency_divisors") {
    for (size_t i = 0; i < inv.size() && i < rope.divisors.size(); ++i) inv[i] /= rope.divisors[i];
  } else if (rope.type == "llama3") {
    // Long wavelengths are slowed by `factor`, short ones kept, and the band between blended.
    const double low_wavelen = rope.original_max_positions / rope.low_freq_factor;
    const double high_wavelen = rope.original_max_positions / rope.high_freq_factor;
    for (double& f : inv) {
      double wavelen = 2.0 * M_PI / f;
      if (wavelen > low_wavelen) {
        f = f / rope.factor;
      } else if (wavelen >= high_wavelen) {
        double smooth = (rope.original_max_positions / wavelen - rope.low_freq_factor) /
                        (rope.high_freq_factor - rope.low_freq_factor);
        f = (1.0 - smooth) * f / rope.factor + smooth * f;
      }
    }
  }
  return inv;
}

std::vector<float> rope_cos_sin_table(const RopeSettings& rope, int64_t head_dim, int64_t max_positions) {
  const int64_t half = head_dim / 2;
  std::vector<double> inv = rope_inverse_frequencies(rope, head_dim);
  std::vector<float> table(size_t(max_positions * head_dim));
  for (int64_t p = 0; p < max_positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      double angle = double(p) * inv[size_t(i)];
      table[size_t(p * head_dim + i)] = float(std::cos(angle));
      table[size_t(p * head_dim + half + i)] = float(std::sin(angle));
    }
  }
  return table;
}

}  // namespace lockstep
