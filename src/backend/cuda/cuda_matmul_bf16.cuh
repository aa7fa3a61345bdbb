// Shared by the bf16 matmul kernels (cuda_matmul_bf16.cu, cuda_matmul_bf16_row.cu): how k is
// cut into runs, the split of x into hi and lo, the copies into shared memory, the mma step, a
// block's rows and the in-order fold of the runs' partials. cuda_matmul_bf16.cu's header gives
// the arithmetic every kernel follows, which these pieces spell once.
#pragma once

#include "backend/cuda/cuda_matmul.cuh"
#include "backend/cuda/cuda_wgmma.cuh"

namespace lockstep::cuda::bf16 {

constexpr int kBlockK = 32;
constexpr int kMaxRuns = 8;
constexpr int kMinBlocksPerRun = 4;
constexpr int kTileCols = 16;

// How k is cut: `blocks` blocks of 32, runs of `per_run` blocks (the last may be shorter).
struct Runs {
  int blocks, per_run, count;
};

__host__ __device__ inline Runs k_runs(int64_t k) {
  const int blocks = int((k + kBlockK - 1) / kBlockK);
  int per_run = (blocks + kMaxRuns - 1) / kMaxRuns;
  per_run = per_run < kMinBlocksPerRun ? kMinBlocksPerRun : per_run;
  return {blocks, per_run, (blocks + per_run - 1) / per_run};
}

// The split of one value: hi = bf16(v), lo = bf16(v - hi). The split pass and the in-kernel
// split both use this, so they give the same bits.
__device__ inline void split(float v, __nv_bfloat16& hi, __nv_bfloat16& lo) {
  hi = __float2bfloat16_rn(v);
  lo = __float2bfloat16_rn(v - __bfloat162float(hi));
}

// Copies 16 bytes from global to shared memory, or zeros when !valid: through L2 only
// (cp.async.cg), or through L1 too (cp.async.ca) for data many blocks of an SM read. ("memory":
// the compiler keeps the lane's earlier shared reads of the slot before it.)
template <bool kThroughL1 = false>
__device__ inline void copy16(void* dst, const void* src, bool valid) {
  const unsigned address = unsigned(__cvta_generic_to_shared(dst));
  if constexpr (kThroughL1)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}

__device__ inline void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int kPending>
__device__ inline void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// d += a * b over one m16n8k16 step (bf16 in, f32 accumulate).
__device__ inline void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                           uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The list entries [first, last) a block computes and the weights it reads: in a grouped
// launch, block row y's group (none when it has no group: first == last); in a plain one,
// `plain_rows` rows from plain_block * plain_rows, with the one weight matrix.
struct BlockRows {
  int64_t first, last;
  const __nv_bfloat16* w;
};

__device__ inline BlockRows block_rows(const MatmulRows& rows, const __nv_bfloat16* w, int64_t plain_rows,
                                       unsigned plain_block) {
  if (!rows.segments) {
    const int64_t first = int64_t(plain_block) * plain_rows;
    return {first, min64(rows.n, first + plain_rows), w};
  }
  const int64_t group = launched_group(rows);
  if (group < 0) return {0, 0, w};
  return {rows.segments[group], rows.segments[group + 1], w + size_t(group) * size_t(rows.group_stride)};
}

// A row group's outputs from the runs' partials, part(run, column, row), in run order:
// total = ((p0 + p1) + p2) + ..., stored by the block's threads in turn (block_cols columns
// from col0, group_rows rows from list entry `group`).
template <class Part>
__device__ inline void store_row_group(const MatmulRows& rows, float* out, int64_t m, int64_t col0, int block_cols,
                                       int64_t group, int group_rows, int run_count, Part part) {
  for (int i = threadIdx.x; i < block_cols * group_rows; i += blockDim.x) {
    const int c = i / group_rows, r = i % group_rows;
    const int64_t col = col0 + c;
    if (col >= m) continue;
    // Unrolled, so the reads go out together (the adds stay in run order).
    float total = part(0, c, r);
#pragma unroll
    for (int s = 1; s < kMaxRuns; ++s)
      if (s < run_count) total += part(s, c, r);
    const int64_t entry = group + r;
    store(rows, out, m, rows.out_rows ? rows.out_rows[entry] : entry, col, total);
  }
}

// Where weight (col, at .. at + 7) is, at % 8 == 0: in row col, or in the packed layout, in
// lane (g, t)'s piece of its column tile's block (g = col % 8, t = at % 32 / 8; the first half
// of the 1 KB holds rows 0-7 of the tile, the second rows 8-15).
template <bool kPacked>
__host__ __device__ inline int64_t weight_at(int64_t col, int64_t at, int64_t k) {
  if (!kPacked) return col * k + at;
  const int64_t tile = col / kTileCols, r = col % kTileCols, b = at / kBlockK, t = at % kBlockK / 8;
  return (tile * (k / kBlockK) + b) * kBlockK * kTileCols + (r / 8) * 256 + ((r % 8) * 4 + t) * 8;
}

// Where position p of a block of 32 goes in the wgmma kernel's split x: the slot the mma
// steps give it (lane t's 8t .. 8t + 3 to the first half's slots 2t, 2t + 1, 2t + 8, 2t + 9,
// its 8t + 4 .. 8t + 7 likewise to the second half's, 16 slots on).
__host__ __device__ inline int slot_of(int p) {
  const int t = p / 8, half = p % 8 / 4, q = p % 4;
  return 16 * half + 2 * t + (q < 2 ? q : 8 + q - 2);
}

// The k loop of the wgmma kernels (cuda_matmul_bf16_wgmma.cu and _tma.cu): each run's blocks on
// acc from zero, block(b, f, running) for each, the A fragments f alternating between two
// register sets (`running`: the set the steps before may still read), then the run joined to
// total in run order. Runs outside and blocks inside: between a run's steps nothing but the
// steps touches acc, so they run on past the loop's turn (given a conditional zeroing instead,
// ptxas waits for them after every block).
template <class Block>
__device__ inline void wgmma_runs(const Runs& runs, float (&acc)[64], float (&total)[64], Block&& block) {
  uint4 sets[2][2];
  for (int run = 0; run < runs.count; ++run) {
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    const int run_end = min(runs.blocks, (run + 1) * runs.per_run);
    for (int b = run * runs.per_run; b < run_end; b += 2) {
      block(b, sets[0], sets[1]);
      if (b + 1 < run_end) block(b + 1, sets[1], sets[0]);
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 64; ++i) total[i] = run == 0 ? acc[i] : total[i] + acc[i];
  }
}

// Stores a wgmma kernel's tile: total[4c + e] is weight column `warp_col` + g (+ 8 for e >= 2)
// and x row 8c + 2t + e % 2 of the tile (list entries from tile_row, tile_rows of them).
__device__ inline void store_wgmma_tile(const MatmulRows& rows, float* out, int64_t m, int64_t warp_col,
                                        int64_t tile_row, int tile_rows, const float (&total)[64]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int c = 0; c < 16; ++c) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t col = warp_col + g + (e >= 2 ? 8 : 0);
      const int row = 8 * c + 2 * t + e % 2;
      if (col >= m || row >= tile_rows) continue;
      const int64_t entry = tile_row + row;
      store(rows, out, m, rows.out_rows ? rows.out_rows[entry] : entry, col, total[4 * c + e]);
    }
  }
}

// The wgmma fill kernel (cuda_matmul_bf16_wgmma.cu): the tiled kernel's sums from x split in
// slot order (hi, lo: rows of padded k). Fills take it, or its TMA-fed form where that takes
// the launch, unless LOCKSTEP_CUDA_WGMMA=0.
bool wgmma_fills_on();
void prepare_matmul_bf16_wgmma();
void launch_matmul_bf16_wgmma(const __nv_bfloat16* hi, const __nv_bfloat16* lo, const __nv_bfloat16* w, float* out,
                              int64_t k, int64_t m, const MatmulRows& rows, Launches& launches);

// The wgmma kernel fed by bulk tensor copies (cuda_matmul_bf16_tma.cu): launches it and returns
// true when the launch is one it takes (packed weights, x in list order), else returns false.
// LOCKSTEP_CUDA_WGMMA_TMA=0 turns it off (every launch then takes the wgmma kernel).
bool launch_matmul_bf16_tma(const __nv_bfloat16* hi, const __nv_bfloat16* lo, const __nv_bfloat16* w, float* out,
                            int64_t k, int64_t m, const MatmulRows& rows, Launches& launches);
void prepare_matmul_bf16_tma();

// The one-row kernel (cuda_matmul_bf16_row.cu): launches it and returns true when the launch
// is one it takes (one row a block, packed weights), else returns false.
bool launch_matmul_bf16_row(const float* x, const __nv_bfloat16* w, float* out, int64_t k, int64_t m,
                            const MatmulRows& rows, Launches& launches);
// Its shared-memory limit; once, before any launch.
void prepare_matmul_bf16_row();

}  // namespace lockstep::cuda::bf16
