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
    stopping_ = true;
    ++epoch_;
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

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return epoch_ != seen; });
      seen = epoch_;
      if (stopping_) return;
    }
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
  {
    std::lock_guard lock(mutex_);
    ++epoch_;
  }
  wake_.notify_all();
  run_share(0);
  while (pending_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

}  // namespace lockstep
