#include "base/philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace lockstep {
namespace {

using Block = std::array<uint32_t, 4>;

// Known-answer vectors of Random123 (kat_vectors, philox4x32 with 10 rounds).
TEST(Philox, KnownAnswerZeros) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (Block{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
}

TEST(Philox, KnownAnswerOnes) {
  const uint32_t ones = 0xffffffffu;
  EXPECT_EQ(philox4x32_10({ones, ones, ones, ones}, {ones, ones}),
            (Block{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
}

TEST(Philox, KnownAnswerPi) {
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (Block{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, UsableAtCompileTime) {
  static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5u);
  static_assert(uniform_at(1, 2) >= 0.0 && uniform_at(1, 2) < 1.0);
}

TEST(UniformAt, InRangeAndOnA53BitGrid) {
  for (uint64_t seed : {uint64_t(0), uint64_t(42), ~uint64_t(0)}) {
    for (uint64_t position = 0; position < 2000; ++position) {
      const double u = uniform_at(seed, position);
      ASSERT_GE(u, 0.0);
      ASSERT_LT(u, 1.0);
      const double scaled = u * 0x1p53;
      ASSERT_EQ(scaled, std::floor(scaled));
    }
  }
}

TEST(UniformAt, SameArgumentsSameDraw) {
  const double first = uniform_at(1234, 99, 3);
  double unrelated = 0;
  for (int i = 0; i < 100; ++i) unrelated += uniform_at(uint64_t(i), uint64_t(i) * 7);
  EXPECT_GT(unrelated, 0.0);
  EXPECT_EQ(uniform_at(1234, 99, 3), first);
}

TEST(UniformAt, SeedPositionAndStreamEachChangeTheDraw) {
  const double base = uniform_at(7, 100, 0);
  EXPECT_NE(uniform_at(8, 100, 0), base);
  EXPECT_NE(uniform_at(7, 101, 0), base);
  EXPECT_NE(uniform_at(7, 100, 1), base);
  // Both words of the seed and of the position are used.
  EXPECT_NE(uniform_at(7 + (uint64_t(1) << 32), 100, 0), base);
  EXPECT_NE(uniform_at(7, 100 + (uint64_t(1) << 32), 0), base);
}

TEST(UniformAt, DrawsAreDistinctAndEvenlySpread) {
  constexpr int kDraws = 20000;
  constexpr int kBins = 10;
  std::set<double> seen;
  int counts[kBins] = {};
  double sum = 0;
  for (int position = 0; position < kDraws; ++position) {
    const double u = uniform_at(2024, uint64_t(position));
    seen.insert(u);
    counts[int(u * kBins)]++;
    sum += u;
  }
  EXPECT_EQ(int(seen.size()), kDraws);
  EXPECT_NEAR(sum / kDraws, 0.5, 0.01);
  // Expected 2000 per bin, standard deviation about 42; the seed is fixed, so this is exact.
  for (int count : counts) {
    EXPECT_GT(count, 1800);
    EXPECT_LT(count, 2200);
  }
}

}  // namespace
}  // namespace lockstep
