// The bf16 matmul for one-row launches: matmul_bf16_row_kernel (see there), with the sums of
// cuda_matmul_bf16.cu's kernels.
#include "backend/cuda/cuda_matmul_bf16.cuh"

namespace lockstep::cuda::bf16 {

namespace {

// One-row launches (a plain launch of one row, a grouped one whose groups have one row each, as
// a one-stream round's expert matmuls do), packed weights: the round kernel's sums with x split
// once a block. The block splits its row's k values into hi and lo in shared memory while its
// warps' first weight copies are on their way; the warps then read x from there, where the
// round kernel's lanes copy and split x again at every block of 32 positions, which at one row
// is most of what its warps issue (docs/gpu-performance.md). The lanes of x rows 1..7 give the
// mma zeros, which no output of row 0 reads; the weights, hi and lo and mma steps are the round
// kernel's, in its order: the same bits.
constexpr int kRowDepth = 6;            // ring blocks a warp: 6 KB of weights
constexpr int64_t kRowMaxK = 8192;      // x's hi and lo take 4 k bytes of shared memory
constexpr int kRowLoads = int(kRowMaxK / (4 * kMaxRuns * 32));  // x's float4 loads a thread

size_t row_kernel_bytes(int warps, int64_t k) { return size_t(warps) * kRowDepth * 64 * sizeof(uint4) + 4 * size_t(k); }

__global__ void __launch_bounds__(kMaxRuns * 32)
    matmul_bf16_row_kernel(const float* __restrict__ x, const __nv_bfloat16* __restrict__ w, float* __restrict__ out,
                           int64_t k, int64_t m, MatmulRows rows, bool weights_first) {
  allow_early_launch();
  extern __shared__ uint4 row_memory[];  // each warp's ring ([slot][2 pieces][lane]), then hi, lo
  __shared__ float partial[kMaxRuns][kTileCols];
  const Runs runs = k_runs(k);
  const int run = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint4* ring = row_memory + size_t(run) * kRowDepth * 64 + lane;
  auto* x_hi = reinterpret_cast<__nv_bfloat16*>(row_memory + size_t(runs.count) * kRowDepth * 64);
  __nv_bfloat16* x_lo = x_hi + k;

  // weights_first (plain launches: which weights they read hangs on no kernel's output, where a
  // grouped launch reads its groups): the first weight copies go out before the wait, while the
  // kernel ahead still runs.
  if (!weights_first) wait_for_inputs();
  const BlockRows mine = block_rows(rows, w, 1, blockIdx.x);
  const unsigned col_tile = rows.segments ? blockIdx.x : blockIdx.y;
  if (mine.first >= mine.last) {  // the whole block leaves together
    if (weights_first) wait_for_inputs();
    return;
  }
  const __nv_bfloat16* w_lane = mine.w + size_t(col_tile) * size_t(k) * kTileCols + lane * 8;
  const int b_begin = run * runs.per_run;
  const int b_end = min(runs.blocks, b_begin + runs.per_run);
  // Stages block b's two weight pieces (nothing past the run's end) into ring slot `slot`.
  auto stage = [&](int b, int slot) {
    if (b < b_end) {
      const __nv_bfloat16* piece = w_lane + int64_t(b) * kBlockK * kTileCols;
      copy16(ring + slot * 64, piece, true);
      copy16(ring + slot * 64 + 32, piece + 256, true);
    }
    commit_copies();
  };
#pragma unroll 1
  for (int s = 0; s < kRowDepth; ++s) stage(b_begin + s, s);
  if (weights_first) wait_for_inputs();

  // The row, split (packed weights have k % 32 == 0 and 16-byte-aligned x): loads first.
  const float* x_row = x + (rows.in_rows ? rows.in_rows[mine.first] : mine.first) * k;
  float4 v[kRowLoads];
#pragma unroll
  for (int i = 0; i < kRowLoads; ++i) {
    const int64_t at = 4 * (threadIdx.x + int64_t(i) * blockDim.x);
    if (at < k) v[i] = *reinterpret_cast<const float4*>(x_row + at);
  }
#pragma unroll
  for (int i = 0; i < kRowLoads; ++i) {
    const int64_t at = 4 * (threadIdx.x + int64_t(i) * blockDim.x);
    if (at >= k) continue;
    split(v[i].x, x_hi[at], x_lo[at]);
    split(v[i].y, x_hi[at + 1], x_lo[at + 1]);
    split(v[i].z, x_hi[at + 2], x_lo[at + 2]);
    split(v[i].w, x_hi[at + 3], x_lo[at + 3]);
  }
  __syncthreads();

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int slot = 0;
  for (int b = b_begin; b < b_end; ++b) {
    wait_copies<kRowDepth - 1>();  // block b is in
    const uint4 wa = ring[slot * 64], wb = ring[slot * 64 + 32];
    uint4 h = make_uint4(0, 0, 0, 0), l = h;
    if (g == 0) {
      h = *reinterpret_cast<const uint4*>(x_hi + int64_t(b) * kBlockK + t * 8);
      l = *reinterpret_cast<const uint4*>(x_lo + int64_t(b) * kBlockK + t * 8);
    }
    mma(acc, wa.x, wb.x, wa.y, wb.y, h.x, h.y);
    mma(acc, wa.x, wb.x, wa.y, wb.y, l.x, l.y);
    mma(acc, wa.z, wb.z, wa.w, wb.w, h.z, h.w);
    mma(acc, wa.z, wb.z, wa.w, wb.w, l.z, l.w);
    stage(b + kRowDepth, slot);  // the slot's weights are in registers and used
    slot = slot + 1 == kRowDepth ? 0 : slot + 1;
  }
  wait_copies<0>();  // the empty groups past the run's end
  // Row 0's sums: lanes t == 0 hold columns g (acc[0]) and g + 8 (acc[2]).
  if (t == 0) partial[run][g] = acc[0], partial[run][g + 8] = acc[2];
  __syncthreads();
  store_row_group(rows, out, m, int64_t(col_tile) * kTileCols, kTileCols, mine.first, 1, runs.count,
                  [&](int s, int c, int) { return partial[s][c]; });
}

}  // namespace

bool launch_matmul_bf16_row(const float* x, const __nv_bfloat16* w, float* out, int64_t k, int64_t m,
                            const MatmulRows& rows, Launches& launches) {
  const bool one_row = rows.segments ? rows.max_group_rows == 1 : rows.n == 1;
  if (!one_row || !rows.packed || k > kRowMaxK || reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
  const unsigned col_tiles = blocks_for(m, kTileCols);
  const dim3 grid = rows.segments ? dim3(col_tiles, unsigned(rows.groups)) : dim3(1, col_tiles);
  const int warps = k_runs(k).count;
  launch(matmul_bf16_row_kernel, grid, dim3(warps * 32), row_kernel_bytes(warps, k), launches, x, w, out, k, m, rows,
         !rows.segments);
  return true;
}

void prepare_matmul_bf16_row() {
  LOCKSTEP_CUDA(cudaFuncSetAttribute(matmul_bf16_row_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(row_kernel_bytes(kMaxRuns, kRowMaxK))));
}

}  // namespace lockstep::cuda::bf16
