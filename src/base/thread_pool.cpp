#include "base/thread_pool.h"

#include <algorithm>

namespace lockstep {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true, std::memory_order_release);
    epoch_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::run_share(int index) {
  if (index >= job_parts_) return;
  int64_t blocks = (job_n_ + job_grain_ - 1) / job_grain_;
  int64_t begin = blocks * index / job_parts_ * job_grain_;
  int64_t end = std::min(job_n_, blocks * (index + 1) / job_parts_ * job_grain_);
  if (begin < end) (*job_)(begin, end);
}

namespace {

void pause_briefly() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = epoch_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinRounds; ++spin) {
      pause_briefly();
      now = epoch_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      std::unique_lock lock(mutex_);
      ++sleepers_;
      wake_.wait(lock, [&] { return epoch_.load(std::memory_order_relaxed) != seen; });
      --sleepers_;
      now = epoch_.load(std::memory_order_relaxed);
    }
    seen = now;
    if (stopping_.load(std::memory_order_acquire)) return;
    run_share(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, RangeFn fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t blocks = (n + grain - 1) / grain;
  int parts = int(std::min<int64_t>(size(), blocks));
  if (parts == 1) {
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  job_parts_ = parts;
  pending_.store(int(workers_.size()), std::memory_order_release);
  bool asleep;
  {
    std::lock_guard lock(mutex_);
    epoch_.fetch_add(1, std::memory_order_release);
    asleep = sleepers_ > 0;
  }
  if (asleep) wake_.notify_all();
  run_share(0);
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinRounds) {
      pause_briefly();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace lockstep
