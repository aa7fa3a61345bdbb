#include "lanes/fill_plan.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

TEST(FillPlan, CutsAtAbsoluteMultiplesOfTheChunk) {
  auto chunks = fill_plan(0, 300, 128);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].begin, 0);
  EXPECT_EQ(chunks[0].end, 128);
  EXPECT_EQ(chunks[2].begin, 256);
  EXPECT_EQ(chunks[2].end, 300);
}

TEST(FillPlan, AResumedFillCutsWhereAWholeFillWould) {
  auto resumed = fill_plan(100, 300, 128);
  ASSERT_EQ(resumed.size(), 3u);
  EXPECT_EQ(resumed[0].begin, 100);
  EXPECT_EQ(resumed[0].end, 128);
  EXPECT_EQ(resumed[1].end, 256);
}

TEST(FillPlan, EmptyRangeHasNoChunks) { EXPECT_TRUE(fill_plan(5, 5, 16).empty()); }

}  // namespace
}  // namespace lockstep
