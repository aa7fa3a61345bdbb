// Random weights for the benchmarks, cheap enough to fill a billion values in about a second.
// Only the magnitude matters to a benchmark, so the values come from xorshift64, not Philox, and
// which value lands where depends on the pool's thread count.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/dtype.h"

namespace lockstep::bench {

// Marsaglia's xorshift64: three shifts per 64 random bits. state must not be 0.
inline uint64_t xorshift64(uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

// A nonzero state for the range starting at `begin`, so every thread draws its own stream.
inline uint64_t stream_state(uint64_t seed, int64_t begin) {
  uint64_t state = (seed ^ 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull + uint64_t(begin) * 0x94D049BB133111EBull;
  return state ? state : 1;
}

// Stores n floats uniform in [-scale, scale), never zero, four per 64 random bits: store(i, value).
template <class Store>
void fill_random(ThreadPool& pool, int64_t n, float scale, uint64_t seed, Store store) {
  constexpr int64_t kGrain = int64_t(1) << 16;
  const float unit = scale / 32768.0f;
  pool.parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    uint64_t state = stream_state(seed, begin);
    for (int64_t i = begin; i < end; i += 4) {
      uint64_t bits = xorshift64(state);
      for (int64_t j = i; j < i + 4 && j < end; ++j, bits >>= 16) store(j, float(int16_t(uint16_t(bits) | 1u)) * unit);
    }
  });
}

// words: bf16 [n]. Every value is a nonzero normal bf16, so a f32 view of the same memory holds
// normal floats of the same size too (a float's top half is its bf16): no denormal slow paths.
inline void fill_random_bf16(ThreadPool& pool, uint16_t* words, int64_t n, float scale, uint64_t seed) {
  fill_random(pool, n, scale, seed, [words](int64_t i, float value) { words[i] = f32_to_bf16(value); });
}

inline void fill_random_f32(ThreadPool& pool, float* values, int64_t n, float scale, uint64_t seed) {
  fill_random(pool, n, scale, seed, [values](int64_t i, float value) { values[i] = value; });
}

}  // namespace lockstep::bench
