#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace lockstep {
namespace {

TEST(ThreadPool, CoversEveryIndexOnceInGrainAlignedRanges) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 5, 16, 17, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, 4, [&](int64_t begin, int64_t end) {
        EXPECT_EQ(begin % 4, 0);
        for (int64_t i = begin; i < end; ++i) hits[size_t(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPool, ManyLoopsInARow) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int i = 0; i < 2000; ++i)
    pool.parallel_for(8, 1, [&](int64_t begin, int64_t end) { total += end - begin; });
  EXPECT_EQ(total.load(), 16000);
}

}  // namespace
}  // namespace lockstep
