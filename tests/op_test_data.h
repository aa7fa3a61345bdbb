// Host-side helpers for the op tests: random data, moving vectors to and from a backend, and
// the per-sequence tensors (SequenceRows) of the recurrent ops.
#pragma once

#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"

namespace lockstep {

inline std::vector<float> normal_floats(std::mt19937& rng, int64_t n, float sd = 1.0f) {
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<float> values(size_t(n), 0.0f);
  for (float& v : values) v = normal(rng);
  return values;
}

// A backend tensor holding `host` (whose element size must match dtype).
template <class T>
OwnedTensor to_backend(Backend& backend, DType dtype, Shape shape, const std::vector<T>& host) {
  OwnedTensor tensor = backend.alloc(dtype, shape);
  backend.upload(tensor, host.data());
  return tensor;
}

inline std::vector<float> to_host(Backend& backend, const Tensor& tensor) {
  std::vector<float> host(size_t(tensor.numel()));
  backend.download(host.data(), tensor);
  return host;
}

inline std::vector<int32_t> ids_to_host(Backend& backend, const Tensor& tensor) {
  std::vector<int32_t> host(size_t(tensor.numel()));
  backend.download(host.data(), tensor);
  return host;
}

// Whether a[a_at ..] and b[b_at ..] hold the same `count` floats, bit for bit.
inline bool same_bits(const std::vector<float>& a, int64_t a_at, const std::vector<float>& b, int64_t b_at,
                      int64_t count) {
  return std::memcmp(a.data() + a_at, b.data() + b_at, size_t(count) * sizeof(float)) == 0;
}

// One sequence of a launch: `length` rows at positions start.., with its state in `slot`.
struct SeqSpec {
  int32_t start = 0;
  int32_t length = 0;
  int32_t slot = 0;
};

// The SequenceRows tensors of a launch whose sequences' rows come in the order of `specs`.
struct SequenceTensors {
  OwnedTensor begin, start, slot;

  SequenceTensors(Backend& backend, const std::vector<SeqSpec>& specs) {
    std::vector<int32_t> begins = {0}, starts, slots;
    for (const SeqSpec& s : specs) {
      begins.push_back(begins.back() + s.length);
      starts.push_back(s.start);
      slots.push_back(s.slot);
    }
    const int64_t n = int64_t(specs.size());
    begin = to_backend(backend, DType::i32, {n + 1}, begins);
    start = to_backend(backend, DType::i32, {n}, starts);
    slot = to_backend(backend, DType::i32, {n}, slots);
  }
  SequenceRows rows() const { return {begin, start, slot, {}}; }
};

// The first row of each sequence in a launch of `specs`.
inline std::vector<int64_t> first_rows(const std::vector<SeqSpec>& specs) {
  std::vector<int64_t> firsts;
  int64_t row = 0;
  for (const SeqSpec& s : specs) {
    firsts.push_back(row);
    row += s.length;
  }
  return firsts;
}

// `count` sequences of 1..max_length rows at random starts (some 0), in slots from first_slot.
inline std::vector<SeqSpec> random_sequences(std::mt19937& rng, int count, int max_length, int32_t first_slot) {
  std::vector<SeqSpec> specs;
  for (int i = 0; i < count; ++i) {
    int32_t start = rng() % 3 == 0 ? 0 : int32_t(rng() % 50);
    specs.push_back({start, int32_t(1 + rng() % uint32_t(max_length)), first_slot + i});
  }
  return specs;
}

}  // namespace lockstep
