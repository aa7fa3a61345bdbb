// Shared by the CUDA backend's kernel files: error checks, launch sizes and the fixed-order
// reductions that keep every row's arithmetic independent of the launch it is in.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "tensor/tensor.h"

namespace lockstep::cuda {

// Aborts with the call and the CUDA error: the backend has no way to go on after one.
void fail(cudaError_t error, const char* what, const char* file, int line);

inline void check(cudaError_t error, const char* what, const char* file, int line) {
  if (error != cudaSuccess) fail(error, what, file, line);
}

#define LOCKSTEP_CUDA(call) ::lockstep::cuda::check((call), #call, __FILE__, __LINE__)
#define LOCKSTEP_LAUNCHED() ::lockstep::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

// Aborts when an op gets shapes it does not support (a programming error, as on the CPU).
void require(bool condition, const char* what);

inline unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

// A warp reduction by a butterfly: every lane ends with the same bits, since each step combines
// the same two values on both lanes of a pair (a + b == b + a; fmaxf likewise).
template <class Op>
__device__ inline float warp_reduce(float v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
  __device__ static float identity() { return 0.0f; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
  __device__ static float identity() { return -INFINITY; }
};

__device__ inline float warp_sum(float v) { return warp_reduce(v, Add{}); }
__device__ inline float warp_max(float v) { return warp_reduce(v, Max{}); }

// A reduction over a block of kThreads threads: warp results, then warp 0 reduces them by the
// same butterfly (lanes past the last warp hold op's identity). `shared` holds kThreads / 32
// floats. Every thread gets the result.
template <int kThreads, class Op>
__device__ inline float block_reduce(float v, float* shared, Op op) {
  constexpr int kWarps = kThreads / 32;
  v = warp_reduce(v, op);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // an earlier reduction's result is read
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    // Every lane has its value before lane 0 writes (the butterfly's shuffles wait for all).
    const float total = warp_reduce(lane < kWarps ? shared[lane] : Op::identity(), op);
    if (lane == 0) shared[0] = total;
  }
  __syncthreads();
  return shared[0];
}

template <int kThreads>
__device__ inline float block_sum(float v, float* shared) {
  return block_reduce<kThreads>(v, shared, Add{});
}

template <int kThreads>
__device__ inline float block_max(float v, float* shared) {
  return block_reduce<kThreads>(v, shared, Max{});
}

__device__ inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Programmatic dependent launch (sm_90): every kernel is launched with launch(), so it may
// be placed while the kernel before it still runs, and must call wait_for_inputs() before it
// reads anything that kernel (or any before it) wrote. Every block calls it before it ends, so
// a launch never completes before the kernels it follows. (In a kernel launched plainly it
// returns at once.) allow_early_launch() lets the next kernel be placed before this one's
// blocks end. A round is then a chain in which each kernel's blocks wait, already placed, for
// the one ahead, and the gaps between kernels shrink (docs/gpu-performance.md has the figures).
// Work that reads nothing a kernel writes (a norm's weights, the one-row matmul's first weight
// copies) may go between the two calls.
__device__ inline void wait_for_inputs() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ inline void allow_early_launch() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
// The first statement of every kernel but the round matmul (which sets up its ring between
// the two).
__device__ inline void start_kernel() {
  allow_early_launch();
  wait_for_inputs();
}

// LOCKSTEP_CUDA_EARLY=0 launches these kernels plainly (to measure what early launches gain).
bool early_launches_on();
// Whether the environment variable `name` is set to "0" (the backend's off switches).
bool switched_off(const char* name);
// Whether it is set to "1" (the backend's experiments, off until measured).
bool switched_on(const char* name);

// Launches a kernel now with programmatic dependent launch (see wait_for_inputs); a launch
// error aborts here, as any CUDA error does. Ops queue their launches through Launches
// (cuda_launches.cuh), which calls this when the pass runs.
template <class... Params, class... Args>
void launch_now(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = early_launches_on() ? 1 : 0;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  LOCKSTEP_CUDA(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// A row's columns cut into up to kMax tensors: out[j] takes columns [begin[j], begin[j + 1]).
struct ColumnSplit {
  static constexpr int kMax = 4;
  float* out[kMax];
  int64_t begin[kMax + 1];
  int count;
};

// Stores v as column col of row r of the split's tensors. (Static indices only, so the split
// stays in the kernel's parameters rather than in a local copy.)
__device__ inline void store_split(const ColumnSplit& split, int64_t r, int64_t col, float v) {
#pragma unroll
  for (int j = 0; j < ColumnSplit::kMax; ++j)
    if (j < split.count && col >= split.begin[j] && col < split.begin[j + 1])
      split.out[j][r * (split.begin[j + 1] - split.begin[j]) + col - split.begin[j]] = v;
}

// Stores v as column col of row r: into out (rows of `width`), or into the split's tensors
// when it has any (the _split ops).
__device__ inline void store_column(float* out, const ColumnSplit& split, int64_t r, int64_t col, int64_t width,
                                    float v) {
  if (split.count == 0)
    out[r * width + col] = v;
  else
    store_split(split, r, col, v);
}

__device__ inline float silu(float v) { return v / (1.0f + expf(-v)); }
__device__ inline float softplus(float v) { return v > 20.0f ? v : log1pf(expf(v)); }

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data);
}

// The split of a row's `width` columns into outs (f32, at most ColumnSplit::kMax of them, no
// wider together than the row); `op` names the caller in errors.
inline ColumnSplit column_split(const std::vector<Tensor>& outs, int64_t width, const char* op) {
  if (outs.size() > size_t(ColumnSplit::kMax)) require(false, (std::string(op) + ": over 4 outputs").c_str());
  ColumnSplit split{};
  split.count = int(outs.size());
  for (size_t j = 0; j < outs.size(); ++j) {
    split.out[j] = ptr<float>(outs[j]);
    split.begin[j + 1] = split.begin[j] + outs[j].cols();
  }
  if (split.begin[split.count] > width) require(false, (std::string(op) + ": the outputs are wider than a row").c_str());
  return split;
}

}  // namespace lockstep::cuda
