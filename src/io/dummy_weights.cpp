#include "io/dummy_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tensor/quant.h"
#include "tensor/quant_tensor.h"

namespace lockstep {

namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& name) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : name) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

}  // namespace

Expected<std::optional<QuantizedWeight>> DummyWeights::quantized(const std::string& name,
                                                                 const Shape& expected) const {
  const std::optional<QuantLayout>& wanted = matmul_quantization();
  std::optional<QuantizedWeight> none;
  if (!wanted || expected.rank != 2 || ends_with(name, "mixer.gate.weight")) return none;
  const int64_t rows = expected[0], k = expected[1];
  const std::optional<QuantLayout> layout = layout_for_rows(*wanted, k);
  if (!layout) return none;
  const QuantFormat format = layout->format;

  Expected<RowBytes> parts = quant_row_bytes(*layout, size_t(k));
  if (!parts.ok()) return parts.error();
  const size_t row_bytes = parts->total();
  QuantizedWeight out{*layout, expected, std::vector<std::byte>(size_t(rows) * row_bytes)};
  // The plain weights' spread: uniform with std 1/sqrt(k) (0.02 for embeddings), half-width a.
  const float half_width = (name.find("embed") != std::string::npos ? 0.02f : 1.0f / std::sqrt(float(k))) * 1.7320508f;
  uint64_t state = seed_ ^ name_hash(name) ^ 0x5175616e74ull;
  auto* bytes = reinterpret_cast<uint8_t*>(out.rows.data());
  for (size_t i = 0; i + 8 <= out.rows.size(); i += 8) {
    const uint64_t word = splitmix64(state);
    std::memcpy(bytes + i, &word, 8);
  }
  auto put16 = [](uint8_t* p, uint16_t v) { p[0] = uint8_t(v), p[1] = uint8_t(v >> 8); };
  auto put_scale = [&](uint8_t* p, DType type, float v) {
    if (type == DType::f32) std::memcpy(p, &v, 4);
    else put16(p, type == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v));
  };
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = bytes + size_t(r) * row_bytes;
    switch (format) {
      case QuantFormat::q8_0:  // d * q, q in -128..127
      case QuantFormat::q4_0:  // d * (q - 8)
        for (int64_t b = 0; b < k / 32; ++b)
          put16(row + b * (format == QuantFormat::q8_0 ? 34 : 18),
                f32_to_f16(half_width / (format == QuantFormat::q8_0 ? 128.0f : 8.0f)));
        break;
      case QuantFormat::q4_k:  // d * sc * q - dmin * m, sc and m six bits
      case QuantFormat::q5_k:
        for (int64_t b = 0; b < k / 256; ++b) {
          const int bits = format == QuantFormat::q4_k ? 4 : 5;
          uint8_t* block = row + b * (format == QuantFormat::q4_k ? 144 : 176);
          put16(block, f32_to_f16(half_width / (63.0f * float((1 << bits) - 1))));
          put16(block + 2, f32_to_f16(half_width / 63.0f));
        }
        break;
      case QuantFormat::q4_1:  // d * q + m, as q5_1 with 4-bit codes
      case QuantFormat::q5_1:
        for (int64_t b = 0; b < k / 32; ++b) {
          const int bits = format == QuantFormat::q4_1 ? 4 : 5;
          uint8_t* block = row + b * (format == QuantFormat::q4_1 ? 20 : 24);
          put16(block, f32_to_f16(2.0f * half_width / float((1 << bits) - 1)));
          put16(block + 2, f32_to_f16(-half_width));
        }
        break;
      case QuantFormat::q5_0:  // d * (q - 16)
        for (int64_t b = 0; b < k / 32; ++b) put16(row + b * 22, f32_to_f16(half_width / 16.0f));
        break;
      case QuantFormat::iq4_nl:  // d * table[q], |table[q]| up to 127
        for (int64_t b = 0; b < k / 32; ++b) put16(row + b * 18, f32_to_f16(half_width / 127.0f));
        break;
      case QuantFormat::q6_k:  // d * scale * (q - 32), scale an int8
        for (int64_t b = 0; b < k / 256; ++b) put16(row + b * 210 + 208, f32_to_f16(half_width / (128.0f * 32.0f)));
        break;
      case QuantFormat::mlx_affine: {  // scale * q + bias over [-a, a]
        const size_t size = dtype_size(layout->scale_type), groups = size_t(k / layout->group);
        const float scale = 2.0f * half_width / float((1 << layout->bits) - 1);
        for (size_t g = 0; g < groups; ++g) {
          put_scale(row + parts->values + g * size, layout->scale_type, scale);
          put_scale(row + parts->values + parts->scales + g * size, layout->scale_type, -half_width);
        }
        break;
      }
      case QuantFormat::fp8_e4m3: {  // code * scale, codes of magnitude up to 448; no NaN codes
        for (int64_t i = 0; i < k; ++i)
          if ((row[i] & 0x7f) == 0x7f) row[i] = uint8_t(row[i] - 1);
        for (size_t b = 0; b < parts->scales / 4; ++b) {
          const float scale = half_width / 448.0f;
          std::memcpy(row + parts->values + b * 4, &scale, 4);
        }
      }
    }
  }
  return std::optional<QuantizedWeight>(std::move(out));
}

Expected<TensorInfo> DummyWeights::find(const std::string& name) const {
  return make_error("dummy weights make '" + name + "' only when asked with its shape");
}

Expected<TensorInfo> DummyWeights::get(const std::string& name, const Shape& expected) const {
  const int64_t n = expected.numel();
  const bool matrix = expected.rank >= 2 && !ends_with(name, "conv1d.weight");
  TensorInfo info;
  info.name = name;
  info.shape = expected;
  info.dtype = matrix ? DType::bf16 : DType::f32;
  info.file = "dummy weights";
  info.bytes = size_t(n) * dtype_size(info.dtype);
  // More than the machine's memory is refused before asking for it (a sanitizer's allocator
  // aborts rather than throw).
  const double physical = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  if (physical > 0 && double(info.bytes) > physical)
    return Error{"dummy weights: tensor '" + name + "' " + expected.to_string() + " needs " + std::to_string(info.bytes) +
                 " bytes of host memory, more than the machine has"};
  try {
    last_.resize(info.bytes);
  } catch (const std::bad_alloc&) {
    return Error{"dummy weights: tensor '" + name + "' " + expected.to_string() + " needs " + std::to_string(info.bytes) +
                 " bytes of host memory, more than there is"};
  } catch (const std::length_error&) {
    return Error{"dummy weights: tensor '" + name + "' " + expected.to_string() + " is too large"};
  }
  info.data = last_.data();

  // Constant vectors by role.
  float constant = NAN;
  if (ends_with(name, "norm.weight") || ends_with(name, "norm_f.weight") || ends_with(name, ".D")) constant = 1.0f;
  else if (ends_with(name, "dt_bias")) constant = std::log(std::expm1(0.01f));  // softplus^-1(0.01)
  else if (ends_with(name, "bias")) constant = 0.0f;
  if (!matrix && ends_with(name, "A_log")) {
    for (int64_t i = 0; i < n; ++i) {
      float value = std::log(float(i + 1));
      std::memcpy(last_.data() + i * 4, &value, 4);
    }
    return info;
  }
  if (!std::isnan(constant)) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(last_.data() + i * 4, &constant, 4);
    return info;
  }
  // Uniform with the role's standard deviation.
  const int64_t inputs = expected[expected.rank - 1];
  float std_dev = ends_with(name, "embed_tokens.weight") || ends_with(name, "embeddings.weight")
                      ? 0.02f
                      : 1.0f / std::sqrt(float(inputs));
  const float half_width = std_dev * std::sqrt(3.0f);
  // Element i is splitmix64's (i + 1)-th draw from the name's seed, so threads can fill
  // ranges independently and large tensors (a 30B model's experts) fill in parallel.
  const uint64_t base = seed_ ^ name_hash(name);
  auto fill = [&](int64_t begin, int64_t end) {
    uint64_t state = base + uint64_t(begin) * 0x9E3779B97F4A7C15ull;
    for (int64_t i = begin; i < end; ++i) {
      float unit = float(splitmix64(state) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
      float value = (2.0f * unit - 1.0f) * half_width;
      if (matrix) {
        uint16_t word = f32_to_bf16(value);
        std::memcpy(last_.data() + i * 2, &word, 2);
      } else {
        std::memcpy(last_.data() + i * 4, &value, 4);
      }
    }
  };
  const int64_t threads = n < (int64_t(1) << 22) ? 1 : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < threads; ++t) workers.emplace_back(fill, n * t / threads, n * (t + 1) / threads);
  fill(0, n / threads);
  for (std::thread& worker : workers) worker.join();
  return info;
}

}  // namespace lockstep
