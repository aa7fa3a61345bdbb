// A fixed pool of worker threads that runs one parallel loop at a time. The caller's thread
// takes part, so a pool of n threads starts n - 1 workers. Work is split statically by thread
// index: which thread computes an element never changes what it computes.
//
// A pass of a small model is many short loops back to back, so a worker that finished one
// watches for the next for a while (kSpinRounds) before it sleeps on the condition variable,
// and the caller waits for the workers the same way: a wake through the kernel costs more than
// such a loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace lockstep {

// A non-owning reference to a callable, so parallel loops allocate nothing.
class RangeFn {
 public:
  template <class F>
  RangeFn(F& fn) : object_(&fn), call_([](void* o, int64_t b, int64_t e) { (*static_cast<F*>(o))(b, e); }) {}
  void operator()(int64_t begin, int64_t end) const { call_(object_, begin, end); }

 private:
  void* object_;
  void (*call_)(void*, int64_t, int64_t);
};

class ThreadPool {
 public:
  // threads <= 0: one per hardware thread.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls fn(begin, end) over [0, n) cut into at most size() contiguous ranges whose bounds
  // are multiples of `grain` (except the last). Returns when every range is done. Not
  // re-entrant: one loop at a time, from one caller thread.
  void parallel_for(int64_t n, int64_t grain, RangeFn fn);

  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    parallel_for(n, grain, RangeFn(fn));
  }

 private:
  void worker_loop(int index);
  void run_share(int index);

  // Pauses a waiting thread spends watching before it sleeps (workers) or yields (the caller):
  // about 100 microseconds.
  static constexpr int kSpinRounds = 4096;

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  // Written under mutex_ (so a worker about to sleep cannot miss it), read without it.
  std::atomic<uint64_t> epoch_{0};
  int sleepers_ = 0;  // workers asleep or about to be; guarded by mutex_
  std::atomic<bool> stopping_{false};
  std::atomic<int> pending_{0};
  // The current loop, read by workers after they see a new epoch.
  const RangeFn* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  int job_parts_ = 1;
};

}  // namespace lockstep
