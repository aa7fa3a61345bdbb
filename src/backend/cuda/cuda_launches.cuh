// A pass's kernel launches, each described once. launch() records the kernel, its grid, block,
// shared memory and its parameters as the kernel will receive them; the CUDA graph key is read
// from that same record, so a replayed graph always holds the launches it was captured with. A
// parameter type the key cannot read (a struct without a key_add) does not compile.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
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
// A tensor map (cuda.h): its 128 bytes.
inline void key_add(LaunchKey& key, const CUtensorMap& map) {
  for (const cuuint64_t word : map.opaque) key_add(key, word);
}
inline void key_add(LaunchKey& key, const MoeRouting& r) {
  static_assert(sizeof(MoeRouting) == 24, "key_add(MoeRouting) must list every field");
  key_add(key, r.groups), key_add(key, r.topk_groups), key_add(key, r.normalize), key_add(key, r.scale);
}

// The parameters of a queued launch: a tuple that stays trivially copyable when its elements
// are (std::tuple is not), so records can be copied into the launch arena as bytes.
template <class... Ts>
struct Tuple {};
template <class T, class... Ts>
struct Tuple<T, Ts...> {
  T head;
  Tuple<Ts...> tail;
  Tuple() = default;
  template <class A, class... As, class = std::enable_if_t<!std::is_same_v<std::decay_t<A>, Tuple>>>
  explicit Tuple(A&& a, As&&... as) : head(std::forward<A>(a)), tail(std::forward<As>(as)...) {}
};

// f(each element of t, in order).
template <class F, class... Done>
void apply_to(F&& f, const Tuple<>&, const Done&... done) {
  f(done...);
}
template <class F, class T, class... Ts, class... Done>
void apply_to(F&& f, const Tuple<T, Ts...>& t, const Done&... done) {
  apply_to(std::forward<F>(f), t.tail, done..., t.head);
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

  // Queues kernel<<<grid, block, shared>>>(args...) as an early launch (launch_now). The record
  // goes into a byte arena that keeps its capacity from pass to pass, so queueing allocates
  // nothing once the passes repeat.
  template <class... Params, class... Args>
  void kernel(void (*fn)(Params...), dim3 grid, dim3 block, size_t shared, Args&&... args) {
    static_assert(sizeof...(Params) == sizeof...(Args), "one argument per kernel parameter");
    using Record = KernelRecord<std::decay_t<Params>...>;
    const Record record{fn, grid, block, shared, Tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)};
    LaunchKey key;
    key_add(key, reinterpret_cast<const void*>(fn));
    key_add(key, grid), key_add(key, block), key_add(key, shared);
    apply_to([&](const auto&... p) { (key_add(key, p), ...); }, record.params);
    queue(key.hash, record);
  }

  // Queues a library call on the stream (cuBLAS): `call` must be a plain function, so that
  // its arguments, which the key reads, are all it acts on.
  template <class... Params, class... Args>
  void library(void (*call)(cudaStream_t, Params...), Args&&... args) {
    using Record = LibraryRecord<std::decay_t<Params>...>;
    const Record record{call, Tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)};
    LaunchKey key;
    key_add(key, reinterpret_cast<const void*>(call));
    apply_to([&](const auto&... p) { (key_add(key, p), ...); }, record.params);
    queue(key.hash, record);
  }

  // Launches what is queued: as a graph where this pass was seen before. LOCKSTEP_CUDA_GRAPHS=0
  // turns graphs off; LOCKSTEP_CUDA_TRACE=1 prints each flush (launches, path, time), waiting
  // for each.
  void flush();

 private:
  // A queued launch: its parameters as the kernel takes them, and how to launch it. Records are
  // copied into the arena as bytes, so every field must be trivially copyable (pointers,
  // scalars and plain structs: all a kernel can take).
  template <class... Params>
  struct KernelRecord {
    void (*fn)(Params...);
    dim3 grid, block;
    size_t shared;
    Tuple<Params...> params;
    static void run(const void* at, cudaStream_t stream) {
      const auto& r = *static_cast<const KernelRecord*>(at);
      apply_to([&](const auto&... p) { launch_now(r.fn, r.grid, r.block, r.shared, stream, p...); }, r.params);
    }
  };
  template <class... Params>
  struct LibraryRecord {
    void (*call)(cudaStream_t, Params...);
    Tuple<Params...> params;
    static void run(const void* at, cudaStream_t stream) {
      const auto& r = *static_cast<const LibraryRecord*>(at);
      apply_to([&](const auto&... p) { r.call(stream, p...); }, r.params);
    }
  };
  struct Queued {
    void (*run)(const void* record, cudaStream_t stream);
    size_t at;  // the record's offset in arena_
  };

  template <class Record>
  void queue(uint64_t key, const Record& record) {
    static_assert(std::is_trivially_copyable_v<Record> && alignof(Record) <= alignof(ArenaSlot));
    queue_bytes(key, &Record::run, &record, sizeof(Record));
  }
  void queue_bytes(uint64_t key, void (*run)(const void*, cudaStream_t), const void* record, size_t bytes);
  void run_pending();

  cudaStream_t stream_;
  std::vector<Queued> pending_;
  // The records of pending_, each from a slot's start: 128-byte aligned, as a tensor map is.
  struct alignas(128) ArenaSlot {
    unsigned char bytes[128];
  };
  std::vector<ArenaSlot> arena_;
  size_t arena_used_ = 0;                // in bytes
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
