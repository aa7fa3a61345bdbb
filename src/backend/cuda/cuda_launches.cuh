// A pass's kernel launches, each described once. launch() records the kernel, its grid, block,
// shared memory and its parameters as the kernel will receive them; the CUDA graph key is read
// from that same record, so a replayed graph always holds the launches it was captured with. A
// parameter type the key cannot read (a struct without a key_add) does not compile.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_common.cuh"

namespace lockstep::cuda {

// A hash of launches: each kernel (its address), its launch shape and every parameter's value.
struct LaunchKey {
  uint64_t hash = 0xcbf29ce484222325ull;
  void mix(uint64_t v) { hash = (hash ^ v) * 0x100000001b3ull ^ (hash >> 29); }
};

template <class T>
std::enable_if_t<std::is_arithmetic_v<T> || std::is_enum_v<T>> key_add(LaunchKey& key, T value) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  key.mix(bits);
}
template <class T>
void key_add(LaunchKey& key, T* pointer) {
  key.mix(reinterpret_cast<uint64_t>(pointer));
}
inline void key_add(LaunchKey& key, dim3 d) { key_add(key, d.x), key_add(key, d.y), key_add(key, d.z); }
// Struct parameters list their fields (next to the struct: ColumnSplit below, MatmulRows, ...).
inline void key_add(LaunchKey& key, const ColumnSplit& s) {
  static_assert(sizeof(ColumnSplit) == 80, "key_add(ColumnSplit) must list every field");
  for (int j = 0; j < ColumnSplit::kMax; ++j) key_add(key, s.out[j]);
  for (int j = 0; j <= ColumnSplit::kMax; ++j) key_add(key, s.begin[j]);
  key_add(key, s.count);
}
inline void key_add(LaunchKey& key, const MoeRouting& r) {
  static_assert(sizeof(MoeRouting) == 24, "key_add(MoeRouting) must list every field");
  key_add(key, r.groups), key_add(key, r.topk_groups), key_add(key, r.normalize), key_add(key, r.scale);
}

// Launches queued for the backend's stream until flush(). Not thread-safe (the backend's one
// thread). A queued pass whose launches equal an earlier pass's runs as a CUDA graph: captured
// the second time it is seen, replayed with one launch from then on.
class Launches {
 public:
  // Makes `device` current and creates the stream the launches go to; the destructor runs what
  // is queued, waits, and frees the graphs and the stream.
  explicit Launches(int device);
  ~Launches();
  Launches(const Launches&) = delete;
  Launches& operator=(const Launches&) = delete;

  cudaStream_t stream() const { return stream_; }

  // Queues kernel<<<grid, block, shared>>>(args...) as an early launch (launch_now).
  template <class... Params, class... Args>
  void kernel(void (*fn)(Params...), dim3 grid, dim3 block, size_t shared, Args&&... args) {
    static_assert(sizeof...(Params) == sizeof...(Args), "one argument per kernel parameter");
    std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
    LaunchKey key;
    key_add(key, reinterpret_cast<const void*>(fn));
    key_add(key, grid), key_add(key, block), key_add(key, shared);
    std::apply([&](const auto&... p) { (key_add(key, p), ...); }, params);
    queue(key.hash, [=](cudaStream_t stream) {
      std::apply([&](const auto&... p) { launch_now(fn, grid, block, shared, stream, p...); }, params);
    });
  }

  // Queues a library call on the stream (cuBLAS): `call` must be a plain function, so that
  // its arguments, which the key reads, are all it acts on.
  template <class... Params, class... Args>
  void library(void (*call)(cudaStream_t, Params...), Args&&... args) {
    std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
    LaunchKey key;
    key_add(key, reinterpret_cast<const void*>(call));
    std::apply([&](const auto&... p) { (key_add(key, p), ...); }, params);
    queue(key.hash, [=](cudaStream_t stream) { std::apply([&](const auto&... p) { call(stream, p...); }, params); });
  }

  // Launches what is queued: as a graph where this pass was seen before. LOCKSTEP_CUDA_GRAPHS=0
  // turns graphs off; LOCKSTEP_CUDA_TRACE=1 prints each flush (launches, path, time), waiting
  // for each.
  void flush();

 private:
  void queue(uint64_t key, std::function<void(cudaStream_t)> run);

  cudaStream_t stream_;
  std::vector<std::function<void(cudaStream_t)>> pending_;
  uint64_t pending_key_ = 0;
  bool use_graphs_ = true;
  std::unordered_set<uint64_t> seen_passes_;
  std::unordered_map<uint64_t, cudaGraphExec_t> graphs_;
};

// The kernel files' spelling of Launches::kernel, in the order of a <<<>>> launch.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, Launches& launches, Args&&... args) {
  launches.kernel(kernel, grid, block, shared, std::forward<Args>(args)...);
}

}  // namespace lockstep::cuda
