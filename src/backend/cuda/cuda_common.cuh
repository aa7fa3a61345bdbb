// Shared by the CUDA backend's kernel files: error checks, launch sizes and the fixed-order
// reductions that keep every row's arithmetic independent of the launch it is in.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

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

// Sum over a warp by a butterfly: every lane ends with the same bits (a + b == b + a).
__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over a block of kThreads threads: warp sums, then warp 0 folds them in warp order.
// `shared` holds kThreads / 32 floats. Every thread gets the result.
template <int kThreads>
__device__ inline float block_sum(float v, float* shared) {
  v = warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) total += shared[w];
  return total;
}

template <int kThreads>
__device__ inline float block_max(float v, float* shared) {
  v = warp_max(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float best = shared[0];
  for (int w = 1; w < kThreads / 32; ++w) best = fmaxf(best, shared[w]);
  return best;
}

__device__ inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

__device__ inline float silu(float v) { return v / (1.0f + expf(-v)); }
__device__ inline float softplus(float v) { return v > 20.0f ? v : log1pf(expf(v)); }

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data);
}

}  // namespace lockstep::cuda
