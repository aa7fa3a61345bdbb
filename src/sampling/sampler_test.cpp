#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "base/philox.h"
#include "sampling/draw_math.h"

namespace lockstep {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Deterministic logits in [-scale, scale), the same on every platform.
std::vector<float> make_logits(int vocab, uint64_t seed, float scale) {
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) {
    logits[size_t(i)] = float((2 * uniform_at(seed, uint64_t(i), 99) - 1) * scale);
  }
  return logits;
}

SamplingParams with_temperature(float temperature, uint64_t seed = 1) {
  SamplingParams params;
  params.temperature = temperature;
  params.seed = seed;
  return params;
}

// How many times each id is sampled over positions [0, positions).
std::vector<int> counts_over(const std::vector<float>& logits, const SamplingParams& params,
                             int positions) {
  Sampler sampler(int(logits.size()));
  std::vector<int> counts(logits.size(), 0);
  for (int position = 0; position < positions; ++position) {
    counts[size_t(sampler.sample(logits.data(), params, position))]++;
  }
  return counts;
}

std::set<int> sampled_ids(const std::vector<float>& logits, const SamplingParams& params,
                          int positions) {
  const std::vector<int> counts = counts_over(logits, params, positions);
  std::set<int> ids;
  for (size_t id = 0; id < counts.size(); ++id) {
    if (counts[id] > 0) ids.insert(int(id));
  }
  return ids;
}

uint32_t bits_of(float value) { return std::bit_cast<uint32_t>(value); }

TEST(DrawMath, MassThresholdIsTheExactCeiling) {
  using draw::WideSum;
  EXPECT_EQ(uint64_t(draw::mass_threshold(bits_of(0.5f), 7)), 4u);
  EXPECT_EQ(uint64_t(draw::mass_threshold(bits_of(0.25f), 8)), 2u);
  EXPECT_EQ(uint64_t(draw::mass_threshold(bits_of(1.0f), 123456789)), 123456789u);
  EXPECT_EQ(uint64_t(draw::mass_threshold(bits_of(0.1f), 10)), 2u);  // 0.1f is a bit above 0.1
  EXPECT_EQ(uint64_t(draw::mass_threshold(bits_of(0.1f), 0)), 0u);
  const WideSum big = (WideSum(1) << 83) - 1;
  EXPECT_EQ(uint64_t(draw::mass_threshold(bits_of(1e-40f), big)), 1u);  // subnormal, product < 1
  // A subnormal whose product passes 1: 2^-140 * 2^82 = 2^-58 still rounds up to 1; 2^-149 * 2^150
  // does not fit, so check 0x1p-130f (normal) * 2^82 * 3 = 3 * 2^-48 -> 1.
  EXPECT_EQ(uint64_t(draw::mass_threshold(bits_of(0x1p-130f), WideSum(3) << 82)), 1u);
  EXPECT_EQ(uint64_t(draw::mass_threshold(bits_of(0x1p-20f), WideSum(3) << 40)), uint64_t(3) << 20);
  EXPECT_EQ(uint64_t(draw::mass_threshold(bits_of(0x1p-20f), (WideSum(3) << 40) + 1)), (uint64_t(3) << 20) + 1);
}

TEST(DrawMath, ScaleByDrawIsTheExactFloor) {
  using draw::WideSum;
  EXPECT_EQ(uint64_t(draw::scale_by_draw(uint64_t(1) << 52, 10)), 5u);  // r / 2^53 = 1/2
  EXPECT_EQ(uint64_t(draw::scale_by_draw((uint64_t(1) << 53) - 1, 1000)), 999u);
  const WideSum total = (WideSum(5) << 80) + 3;
  EXPECT_EQ(draw::scale_by_draw(uint64_t(1) << 51, total), total / 4);  // floor(total / 4)
}

TEST(ArgmaxRow, PicksTheLargestTiesToLowestAndIgnoresNaN) {
  const std::vector<float> plain = {1, 5, 3, -2};
  EXPECT_EQ(argmax_row(plain.data(), 4), 1);
  const std::vector<float> tied = {1, 5, 3, 5, 5};
  EXPECT_EQ(argmax_row(tied.data(), 5), 1);
  const std::vector<float> nan_first = {kNaN, -7, kNaN, -3};
  EXPECT_EQ(argmax_row(nan_first.data(), 4), 3);
  const std::vector<float> infinite = {1, kInf, 3, kInf};
  EXPECT_EQ(argmax_row(infinite.data(), 4), 1);
}

TEST(ArgmaxRow, NothingFiniteGivesZero) {
  const std::vector<float> empty = {kNaN, -kInf, kNaN, -kInf};
  EXPECT_EQ(argmax_row(empty.data(), 4), 0);
}

TEST(Sampler, GreedyIsArgmaxWithTiesToLowest) {
  Sampler sampler(1000);
  for (uint64_t row = 0; row < 20; ++row) {
    const std::vector<float> logits = make_logits(1000, row, 10);
    EXPECT_EQ(sampler.sample(logits.data(), SamplingParams{}, int64_t(row)),
              argmax_row(logits.data(), 1000));
  }
  const std::vector<float> tied = {0, 2, 1, 2};
  Sampler small(4);
  EXPECT_EQ(small.sample(tied.data(), SamplingParams{}, 0), 1);
}

TEST(Sampler, SameSeedAndPositionGiveTheSameTokenWhateverCameBetween) {
  const std::vector<float> logits = make_logits(300, 5, 3);
  const std::vector<float> other_logits = make_logits(300, 6, 8);
  const SamplingParams params = with_temperature(1.0f, 77);
  SamplingParams other = with_temperature(0.7f, 12);
  other.top_k = 40;
  other.top_p = 0.9f;

  Sampler in_order(300);
  std::vector<int32_t> expected;
  for (int position = 0; position < 200; ++position) {
    expected.push_back(in_order.sample(logits.data(), params, position));
  }
  Sampler interleaved(300);
  for (int position = 199; position >= 0; --position) {
    const int32_t noise = interleaved.sample(other_logits.data(), other, position + 1000);
    ASSERT_LT(noise, 300);
    EXPECT_EQ(interleaved.sample(logits.data(), params, position), expected[size_t(position)])
        << "position " << position;
  }
}

TEST(Sampler, DifferentSeedsGiveDifferentReplies) {
  const std::vector<float> logits(50, 0.0f);
  Sampler sampler(50);
  int differing = 0;
  for (int position = 0; position < 100; ++position) {
    differing += sampler.sample(logits.data(), with_temperature(1, 1), position) !=
                 sampler.sample(logits.data(), with_temperature(1, 2), position);
  }
  EXPECT_GT(differing, 80);  // two flat draws over 50 ids agree 2% of the time
}

TEST(Sampler, FlatLogitsSpreadEvenlyOverPositions) {
  // Expected 100 per id, standard deviation about 9.5; the seed is fixed, so this is exact.
  const std::vector<int> counts = counts_over(std::vector<float>(10, 1.5f), with_temperature(1),
                                              1000);
  for (int count : counts) {
    EXPECT_GT(count, 60);
    EXPECT_LT(count, 140);
  }
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  const std::vector<float> logits = {std::log(1.0f), std::log(2.0f), std::log(3.0f),
                                     std::log(4.0f)};
  const std::vector<int> counts = counts_over(logits, with_temperature(1), 20000);
  for (size_t id = 0; id < 4; ++id) {
    EXPECT_NEAR(counts[id] / 20000.0, (id + 1) / 10.0, 0.015) << "id " << id;
  }
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  const std::vector<float> logits = {0.0f, 1.0f};
  EXPECT_GT(counts_over(logits, with_temperature(0.05f), 1000)[1], 990);
  EXPECT_NEAR(counts_over(logits, with_temperature(100.0f), 4000)[1] / 4000.0, 0.5025, 0.03);
}

TEST(Sampler, TopKOfOneTinyTopPAndMinPOfOneAreGreedy) {
  Sampler sampler(500);
  for (int position = 0; position < 200; ++position) {
    const std::vector<float> logits = make_logits(500, uint64_t(position), 4);
    const int32_t greedy = argmax_row(logits.data(), 500);
    SamplingParams top_k = with_temperature(1.5f, 3);
    top_k.top_k = 1;
    SamplingParams top_p = with_temperature(1.5f, 3);
    top_p.top_p = 1e-6f;
    SamplingParams smallest_top_p = top_p;
    smallest_top_p.top_p = std::numeric_limits<float>::denorm_min();
    SamplingParams min_p = with_temperature(1.5f, 3);
    min_p.min_p = 1.0f;
    EXPECT_EQ(sampler.sample(logits.data(), top_k, position), greedy);
    EXPECT_EQ(sampler.sample(logits.data(), top_p, position), greedy);
    EXPECT_EQ(sampler.sample(logits.data(), smallest_top_p, position), greedy);
    EXPECT_EQ(sampler.sample(logits.data(), min_p, position), greedy);
  }
}

TEST(Sampler, MinPOfOneKeepsEveryTiedTopToken) {
  const std::vector<float> logits = {1, 3, 0, 3, 2, 3};
  SamplingParams params = with_temperature(1);
  params.min_p = 1.0f;
  EXPECT_EQ(sampled_ids(logits, params, 300), (std::set<int>{1, 3, 5}));
}

TEST(Sampler, TopKKeepsOnlyTheKBest) {
  const std::vector<float> logits = make_logits(1000, 42, 2);
  std::vector<int> by_logit(1000);
  for (int i = 0; i < 1000; ++i) by_logit[size_t(i)] = i;
  std::sort(by_logit.begin(), by_logit.end(),
            [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
  SamplingParams params = with_temperature(5.0f, 9);
  params.top_k = 5;
  const std::set<int> best_five(by_logit.begin(), by_logit.begin() + 5);
  EXPECT_EQ(sampled_ids(logits, params, 2000), best_five);
  // -1 is off, as 0 is (OpenAI's and vLLM's spelling).
  params.top_k = -1;
  const std::vector<int> minus_one = counts_over(logits, params, 2000);
  params.top_k = 0;
  EXPECT_EQ(minus_one, counts_over(logits, params, 2000));
  EXPECT_GT(sampled_ids(logits, params, 2000).size(), 5u);
}

TEST(Sampler, TopPKeepsTheNucleus) {
  // Probabilities 0.5, 0.3, 0.15, 0.05.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  SamplingParams params = with_temperature(1);
  params.top_p = 0.7f;
  EXPECT_EQ(sampled_ids(logits, params, 2000), (std::set<int>{0, 1}));
  params.top_p = 0.9f;
  EXPECT_EQ(sampled_ids(logits, params, 2000), (std::set<int>{0, 1, 2}));
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheTop) {
  const std::vector<float> logits = {std::log(0.3f), std::log(0.5f), std::log(0.15f),
                                     std::log(0.05f)};
  SamplingParams params = with_temperature(1);
  params.min_p = 0.2f;  // keeps prob >= 0.1
  EXPECT_EQ(sampled_ids(logits, params, 2000), (std::set<int>{0, 1, 2}));
  params.min_p = 0.5f;  // keeps prob >= 0.25
  EXPECT_EQ(sampled_ids(logits, params, 2000), (std::set<int>{0, 1}));
}

TEST(Sampler, NaNAndInfinities) {
  const std::vector<float> some_nan = {kNaN, 0.0f, kNaN, 0.0f, -kInf};
  EXPECT_EQ(sampled_ids(some_nan, with_temperature(1), 500), (std::set<int>{1, 3}));
  const std::vector<float> nothing = {kNaN, -kInf, kNaN};
  EXPECT_EQ(sampled_ids(nothing, with_temperature(1), 50), (std::set<int>{0}));
  const std::vector<float> infinite = {kInf, 1e30f, kNaN, kInf, 0.0f};
  EXPECT_EQ(sampled_ids(infinite, with_temperature(1), 500), (std::set<int>{0, 3}));
}

TEST(Validate, AcceptsDefaultsAndBounds) {
  EXPECT_TRUE(validate(SamplingParams{}).ok());
  SamplingParams bounds;
  bounds.temperature = 100.0f;
  bounds.top_k = 1 << 30;
  bounds.top_p = 1e-30f;
  bounds.min_p = 1.0f;
  EXPECT_TRUE(validate(bounds).ok());
  bounds.top_k = -1;
  EXPECT_TRUE(validate(bounds).ok());
}

TEST(Validate, RejectsEachFieldByName) {
  struct Case {
    SamplingParams params;
    const char* field;
    const char* value;
  };
  std::vector<Case> cases;
  const auto add = [&](auto set, const char* field, const char* value) {
    SamplingParams params;
    set(params);
    cases.push_back({params, field, value});
  };
  add([](SamplingParams& p) { p.temperature = -1; }, "temperature", "-1");
  add([](SamplingParams& p) { p.temperature = 101; }, "temperature", "101");
  add([](SamplingParams& p) { p.temperature = kNaN; }, "temperature", "nan");
  add([](SamplingParams& p) { p.temperature = kInf; }, "temperature", "inf");
  add([](SamplingParams& p) { p.top_k = -2; }, "top_k", "-2");
  add([](SamplingParams& p) { p.top_p = 0; }, "top_p", "0");
  add([](SamplingParams& p) { p.top_p = 1.5f; }, "top_p", "1.5");
  add([](SamplingParams& p) { p.top_p = kNaN; }, "top_p", "nan");
  add([](SamplingParams& p) { p.min_p = -0.25f; }, "min_p", "-0.25");
  add([](SamplingParams& p) { p.min_p = 2; }, "min_p", "2");
  add([](SamplingParams& p) { p.min_p = kNaN; }, "min_p", "nan");
  for (const Case& c : cases) {
    const Status status = validate(c.params);
    ASSERT_FALSE(status.ok()) << c.field << " " << c.value;
    EXPECT_NE(status.message().find(c.field), std::string::npos) << status.message();
    EXPECT_NE(status.message().find(std::string("got ") + c.value), std::string::npos)
        << status.message();
  }
}

TEST(FreshSeed, DiffersBetweenCalls) {
  EXPECT_NE(fresh_seed(), fresh_seed());  // equal with probability 2^-64
}

}  // namespace
}  // namespace lockstep
