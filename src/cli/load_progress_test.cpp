#include "cli/load_progress.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

TEST(LoadProgressTest, LinesSayHowMuchAndHowLong) {
  EXPECT_EQ(load_progress_line(0, 27'000'000'000, 0.0, false), "loading weights: 0.0 of 27.0 GB (0%)");
  EXPECT_EQ(load_progress_line(13'500'000'000, 27'000'000'000, 10.0, false),
            "loading weights: 13.5 of 27.0 GB (50%), 10 s left");
  EXPECT_EQ(load_progress_line(6'750'000'000, 27'000'000'000, 3.0, true),
            "loading weights [######------------------]: 6.8 of 27.0 GB (25%), 9 s left");
  EXPECT_EQ(load_progress_line(27'000'000'000, 27'000'000'000, 31.6, true),
            "loading weights [########################]: 27.0 of 27.0 GB (100%), in 32 s");
}

}  // namespace
}  // namespace lockstep
