// The CUDA matmul for rounds and fills: bf16 or f32 weights, f32 activations, f32 sums.
//
// The reduction order of out[r][c] is fixed by k alone: k is cut into chunks of 256; lane l of
// a warp owns positions 8l .. 8l+7 of every chunk and adds their products chunk by chunk in
// position order, with one fused multiply-add each; the 32 lane sums are then folded by a
// butterfly. Nothing in that order depends on the number of rows, where a row sits, or how
// the launch is split into blocks, so a row's result is bit-identical in any round.
//
// Layout: a block of 8 warps owns 16 output columns (2 per warp) and walks the rows in tiles
// of 8. For each group of 4 chunks the block stages the tile's x values in shared memory
// while each warp holds its columns' weights in registers, so every weight byte is read once
// per row tile and every x value once per block.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_matmul.cuh"

namespace lockstep {

namespace cuda {

namespace {

constexpr int kChunk = 256;      // k positions per warp step: 32 lanes x 8
constexpr int kGroup = 4;        // chunks staged per shared-memory round
constexpr int kRowTile = 8;      // rows computed together
constexpr int kColsPerWarp = 2;
constexpr int kWarps = 8;
constexpr int kColsPerBlock = kWarps * kColsPerWarp;
constexpr int kSpan = kGroup * kChunk;

// Eight consecutive weights as floats; positions at or past k read as zero.
template <bool kBf16>
__device__ inline void load8(const void* w_row, int64_t at, int64_t k, bool vector_ok, float (&out)[8]) {
  if (vector_ok && at + 8 <= k) {
    if constexpr (kBf16) {
      uint4 raw = __ldg(reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(w_row) + at));
      const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float2 f = __bfloat1622float2(pairs[i]);
        out[2 * i] = f.x;
        out[2 * i + 1] = f.y;
      }
    } else {
      const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(w_row) + at);
      float4 a = __ldg(p), b = __ldg(p + 1);
      out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
      out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if (at + i >= k) {
      out[i] = 0.0f;
    } else if constexpr (kBf16) {
      out[i] = __bfloat162float(static_cast<const __nv_bfloat16*>(w_row)[at + i]);
    } else {
      out[i] = static_cast<const float*>(w_row)[at + i];
    }
  }
}

template <bool kBf16>
__global__ void __launch_bounds__(kWarps * 32)
    matmul_kernel(const float* __restrict__ x, const void* __restrict__ w, float* __restrict__ out, int64_t k,
                  int64_t m, MatmulRows rows) {
  __shared__ __align__(16) float xs[kRowTile][kSpan];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t group = blockIdx.y;
  int64_t first = 0, last = rows.n;
  if (rows.segments) first = rows.segments[group], last = rows.segments[group + 1];
  if (first >= last) return;  // the whole block leaves together: no barrier is skipped
  const size_t elem = kBf16 ? 2 : 4;
  const char* w_group = static_cast<const char*>(w) + size_t(group) * size_t(rows.group_stride) * elem;
  const int64_t col0 = int64_t(blockIdx.x) * kColsPerBlock + warp * kColsPerWarp;
  const bool vector_ok = k % 8 == 0;

  for (int64_t tile = first; tile < last; tile += kRowTile) {
    const int tile_rows = int(min64(kRowTile, last - tile));
    float acc[kColsPerWarp][kRowTile];
#pragma unroll
    for (int c = 0; c < kColsPerWarp; ++c)
#pragma unroll
      for (int r = 0; r < kRowTile; ++r) acc[c][r] = 0.0f;

    for (int64_t span = 0; span < k; span += kSpan) {
      // This warp's weights for the span, in registers before the barrier.
      float wv[kColsPerWarp][kGroup][8];
#pragma unroll
      for (int c = 0; c < kColsPerWarp; ++c) {
        const int64_t col = col0 + c;
        const void* w_row = w_group + size_t(col < m ? col : 0) * size_t(k) * elem;
#pragma unroll
        for (int q = 0; q < kGroup; ++q) load8<kBf16>(w_row, span + q * kChunk + lane * 8, col < m ? k : 0, vector_ok, wv[c][q]);
      }
      __syncthreads();  // the previous span's x values are no longer read
      for (int i = threadIdx.x; i < kRowTile * kSpan; i += kWarps * 32) {
        const int r = i / kSpan, at = i % kSpan;
        float value = 0.0f;
        if (r < tile_rows && span + at < k) {
          int64_t entry = tile + r;
          int64_t row = rows.in_rows ? rows.in_rows[entry] : entry;
          value = x[row * k + span + at];
        }
        xs[r][at] = value;
      }
      __syncthreads();
#pragma unroll
      for (int q = 0; q < kGroup; ++q) {
#pragma unroll
        for (int r = 0; r < kRowTile; ++r) {
          if (r >= tile_rows) break;
          const float4* xp = reinterpret_cast<const float4*>(&xs[r][q * kChunk + lane * 8]);
          float4 a = xp[0], b = xp[1];
          float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
          for (int c = 0; c < kColsPerWarp; ++c)
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[c][r] = __fmaf_rn(wv[c][q][i], xv[i], acc[c][r]);
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kColsPerWarp; ++c) {
#pragma unroll
      for (int r = 0; r < kRowTile; ++r) {
        if (r >= tile_rows) break;
        float total = warp_sum(acc[c][r]);
        const int64_t col = col0 + c;
        if (lane == 0 && col < m) {
          int64_t entry = tile + r;
          int64_t row = rows.out_rows ? rows.out_rows[entry] : entry;
          out[row * m + col] = total;
        }
      }
    }
  }
}

}  // namespace

void launch_matmul(const float* x, const void* w, bool w_bf16, float* out, int64_t k, int64_t m,
                   const MatmulRows& rows, cudaStream_t stream) {
  if (m == 0 || (!rows.segments && rows.n == 0)) return;
  dim3 grid(blocks_for(m, kColsPerBlock), unsigned(rows.segments ? rows.groups : 1));
  if (w_bf16) matmul_kernel<true><<<grid, kWarps * 32, 0, stream>>>(x, w, out, k, m, rows);
  else matmul_kernel<false><<<grid, kWarps * 32, 0, stream>>>(x, w, out, k, m, rows);
  LOCKSTEP_LAUNCHED();
}

}  // namespace cuda

void CudaBackend::matmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  cuda::MatmulRows rows;
  rows.n = x.rows();
  cuda::launch_matmul(cuda::ptr<float>(x), w.data, w.dtype == DType::bf16, cuda::ptr<float>(out), x.cols(), w.shape[0],
                      rows, static_cast<cudaStream_t>(stream_));
}

}  // namespace lockstep
