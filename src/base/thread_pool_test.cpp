#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
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

// Workers that found no loop for a while sleep on the condition variable; the next loop must
// wake them (a lost wake would hang here) and still give every index once.
TEST(ThreadPool, LoopsAfterTheWorkersFellAsleep) {
  ThreadPool pool(3);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::atomic<int>> hits(64);
    pool.parallel_for(64, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) hits[size_t(i)]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "round " << round;
    // Longer than the workers watch for a loop (about 100 microseconds), on some rounds.
    if (round % 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// A pool stops whether its workers are still watching for a loop or already asleep.
TEST(ThreadPool, StopsWhileItsWorkersWatchOrSleep) {
  for (int wait_ms : {0, 5}) {
    ThreadPool pool(2);
    std::atomic<int64_t> total{0};
    pool.parallel_for(2, 1, [&](int64_t begin, int64_t end) { total += end - begin; });
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    EXPECT_EQ(total.load(), 2);
  }
}

}  // namespace
}  // namespace lockstep
