#include "io/dummy_weights.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <thread>
#include <unistd.h>
#include <vector>

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
