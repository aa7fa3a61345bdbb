// Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw, "Parallel random
// numbers: as easy as 1, 2, 3" (SC 2011), and uniform draws keyed by (seed, position, stream).
// A draw is a pure function of its arguments: there is no generator state, so any thread may
// call these in any order, and a seeded reply is the same under any batching
// (docs/architecture.md, "Seeded sampling").
#pragma once

#include <array>
#include <cstdint>

namespace lockstep {

// One Philox4x32 block: 10 rounds over the counter, the key bumped by the Weyl constants between
// rounds. Matches the known-answer vectors of the Random123 library (see philox_test.cpp).
[[nodiscard]] constexpr std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter,
                                                              std::array<uint32_t, 2> key) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53u;
  constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
  constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    const uint64_t product0 = uint64_t(kMultiplier0) * counter[0];
    const uint64_t product1 = uint64_t(kMultiplier1) * counter[2];
    counter = {uint32_t(product1 >> 32) ^ counter[1] ^ key[0], uint32_t(product1),
               uint32_t(product0 >> 32) ^ counter[3] ^ key[1], uint32_t(product0)};
  }
  return counter;
}

// A uniform draw in [0, 1), an exact multiple of 2^-53, so draw * 2^53 is an integer below 2^53.
// Key: (seed low word, seed high word). Counter: (position low word, position high word, stream,
// 0). The 53 bits are the top bits of (output word 1 << 32 | output word 0). Distinct streams
// give independent draws for the same (seed, position); token sampling uses stream 0.
[[nodiscard]] constexpr double uniform_at(uint64_t seed, uint64_t position, uint32_t stream = 0) {
  const std::array<uint32_t, 4> block = philox4x32_10(
      {uint32_t(position), uint32_t(position >> 32), stream, 0u},
      {uint32_t(seed), uint32_t(seed >> 32)});
  const uint64_t bits = (uint64_t(block[1]) << 32 | block[0]) >> 11;
  return double(bits) * 0x1p-53;
}

}  // namespace lockstep
