// The tensor-core matmul for bf16 weights: f32 activations, f32 sums, any row count.
//
// The activations are split: x = hi + lo, two bf16 values each (hi rounds x, lo rounds the
// rest), so x keeps 16 significant bits and the product keeps about the accuracy of an f32
// one; each weight tile is multiplied by both with mma.sync (m16n8k16, f32 accumulate). Fill
// launches split x in a pass of their own; rounds in the kernel, with the same values.
//
// The arithmetic of out[r][c] is fixed by k alone:
//   - k is read in blocks of 32 (zero-padded at the end), and the blocks are cut into
//     `k_runs(k)` runs of consecutive blocks (at most 8);
//   - a run's partial sum starts at zero and adds, block after block, four mma steps: the
//     block's first half against hi, then against lo, then its second half likewise. Within a
//     block, lane t of a warp brings the 8 positions 8t .. 8t+7: the first four to the first
//     half's mma, the last four to the second's (a fixed permutation of k inside the mma);
//   - out = ((p0 + p1) + p2) + ... over the runs in order.
// A tensor core computes each output of an mma from its own row and column alone, so none of
// this depends on the number of rows, on where a row sits, or on the launch's layout: a row's
// result is bit-identical in any round, and a fill chunk's rows equal the same rows decoded.
//
// Layout (the round kernel): a block owns 16 output columns (32 in plain launches of more than
// 8 rows); its warps are the runs, one each, so the weights are read once per row group and
// the runs' partials meet in shared memory. Row groups are 8 or 16 rows (by the launch's row
// count, or a grouped launch's rows per group: layout only); a plain launch of more rows gives
// each row group a block, launched beside the others of its columns so that they share the
// weights through L2, and a grouped (MoE) block takes its group's row groups in turn.
// One-row launches with packed weights take the row kernel (cuda_matmul_bf16_row.cu: x split
// once a block), and fill-sized launches the wgmma kernel (cuda_matmul_bf16_wgmma.cu) or, with
// LOCKSTEP_CUDA_WGMMA=0, the tiled one below: the same sums in each.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_matmul_bf16.cuh"

namespace lockstep::cuda {

using namespace bf16;

namespace {

// Plain launches of this many rows take the tiled kernel (fills).
constexpr int64_t kTiledMinRows = 256;
// Grouped launches (a layer's experts) take it when their groups hold this many rows on
// average: a fill's experts get hundreds each, but from 256 streams a round's launch can hold
// 256 rows a group though 128 experts get about 12 each, and the tiled kernel's 64-row tiles
// would run mostly empty (docs/gpu-performance.md, "Rounds of 64 to 1,024 streams").
constexpr int64_t kTiledGroupRows = 64;

// The two thresholds above, or the environment's LOCKSTEP_CUDA_FILL_ROWS and
// LOCKSTEP_CUDA_FILL_GROUP_ROWS (an experiment: where the wgmma kernels take over from the round
// kernels, for rounds of 128 streams and more; 128 and 32 rows were within noise of these on
// 64 to 256 streams, docs/gpu-performance.md "Session 47").
int64_t threshold(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  if (!value) return fallback;
  char* end = nullptr;
  const long long rows = std::strtoll(value, &end, 10);
  require(*value != '\0' && *end == '\0' && rows >= 1, (std::string(name) + " is a row count of 1 or more").c_str());
  return int64_t(rows);
}
// LOCKSTEP_CUDA_WGMMA_GATHER=1 (an experiment: its invariance tests pass; 1.04x on the 30B fill in
// one run, session 47, so not yet the default): a fill-sized launch that
// gathers x (in_rows: the experts' first matmul) with packed weights has the split pass write
// each list entry's row, so the wgmma kernels read x in list order and the TMA-fed one takes it.
// Its split then holds rows.n rows, not x_rows.
bool gathered_split(const MatmulRows& rows) {
  static const bool on = switched_on("LOCKSTEP_CUDA_WGMMA_GATHER");
  return on && rows.in_rows != nullptr && rows.packed && wgmma_fills_on();
}

int64_t fill_rows() {
  static const int64_t rows = threshold("LOCKSTEP_CUDA_FILL_ROWS", kTiledMinRows);
  return rows;
}
int64_t fill_group_rows() {
  static const int64_t rows = threshold("LOCKSTEP_CUDA_FILL_GROUP_ROWS", kTiledGroupRows);
  return rows;
}

int64_t padded_k(int64_t k) { return (k + kBlockK - 1) / kBlockK * kBlockK; }

// hi[e][c], lo[e][c] = split(x[r][c]) for n rows e, with r = e, or with in_rows (a launch that
// gathers x) r = in_rows[e], zeros where r is not one of x's x_rows rows; zero for
// k <= c < kpad. kSlots: each block of 32 in the wgmma kernel's slot order instead (slot_of).
template <bool kSlots>
__global__ void split_kernel(const float* x, const int32_t* in_rows, int64_t x_rows, int64_t n, int64_t k,
                             int64_t kpad, __nv_bfloat16* hi, __nv_bfloat16* lo) {
  start_kernel();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * kpad) return;
  const int64_t e = i / kpad, c = i % kpad, r = in_rows ? in_rows[e] : e;
  const int64_t to = kSlots ? i - c % kBlockK + slot_of(int(c % kBlockK)) : i;
  split(r >= 0 && r < x_rows && c < k ? x[r * k + c] : 0.0f, hi[to], lo[to]);
}

// Eight weights from position `at` of a row; positions at or past k read as zero.
__device__ inline uint4 load_w8(const __nv_bfloat16* row, int64_t at, int64_t k) {
  uint32_t word[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const unsigned short a = at + 2 * i < k ? __bfloat16_as_ushort(row[at + 2 * i]) : 0;
    const unsigned short b = at + 2 * i + 1 < k ? __bfloat16_as_ushort(row[at + 2 * i + 1]) : 0;
    word[i] = uint32_t(a) | (uint32_t(b) << 16);
  }
  return make_uint4(word[0], word[1], word[2], word[3]);
}

// Packs `rows` rows of k weights (rows % 16 == 0, k % 32 == 0) from src into dst: each thread
// moves one 16-byte piece.
__global__ void pack_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t rows, int64_t k) {
  start_kernel();
  const int64_t piece = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (piece >= rows * k / 8) return;
  const int64_t col = piece / (k / 8), at = piece % (k / 8) * 8;
  dst[weight_at<true>(col, at, k) / 8] = src[piece];
}

// How the round kernel's lanes get their weight pieces (the host picks): `loads`, any k: each
// lane loads and packs its eight values; `copies`, k % 8 == 0 with 16-byte-aligned weights and
// x: one cp.async a piece, from the weight rows; `packed`, weights rearranged by pack_kernel (a
// column tile's block of 16 rows x 32 positions is 1 KB, in the order the lanes read it): one
// cp.async a piece, and a warp's pieces of a block are one contiguous 1 KB.
enum class Pieces { loads, copies, packed };

// The round kernel's staging: each lane copies the 16-byte pieces it will read (its two weight
// rows' eight positions of a block, and its x row's eight f32 of each tile) into its own
// places of a ring of kDepth blocks in shared memory, kDepth - 1 blocks ahead of the block it
// multiplies. No lane reads another's pieces, so a lane's own cp.async.wait_group is the only
// wait. A piece's place is [slot][piece][lane], so a quarter warp reads 128 contiguous bytes.
// The ring keeps many blocks of both in flight where registers could hold few without spilling.
// Weights go through L2 only (cp.async.cg: each byte is read once); x through L1
// (cp.async.ca): every block of the launch reads the same x rows, which from L2 would make the
// few slices holding them serve every SM. (Measured gains of each: docs/gpu-performance.md.)
template <int kTiles, int kCols>
struct Ring {
  static constexpr int kPieces = 2 * kCols + 2 * kTiles;  // two of weights per column tile, two of x per row tile
  static constexpr int kDepth = kTiles == 1 ? 6 : kCols == 1 ? 4 : 3;
  static constexpr size_t kWarpBytes = size_t(kDepth) * kPieces * 32 * sizeof(uint4);
};

// Eight x values from position `at` of a row as two 16-byte pieces; zero at or past k.
__device__ inline void load_x8(const float* row, int64_t at, int64_t k, uint4& a, uint4& b) {
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = at + i < k ? row[at + i] : 0.0f;
  a = make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
  b = make_uint4(__float_as_uint(v[4]), __float_as_uint(v[5]), __float_as_uint(v[6]), __float_as_uint(v[7]));
}

// hi and lo (as split_kernel makes them) of eight values held as two 16-byte pieces, packed
// two to a word.
__device__ inline void split_pieces(const uint4& a, const uint4& b, uint4& hi, uint4& lo) {
  const float v[8] = {__uint_as_float(a.x), __uint_as_float(a.y), __uint_as_float(a.z), __uint_as_float(a.w),
                      __uint_as_float(b.x), __uint_as_float(b.y), __uint_as_float(b.z), __uint_as_float(b.w)};
  uint32_t h[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat16 h0, h1, l0, l1;
    split(v[2 * i], h0, l0);
    split(v[2 * i + 1], h1, l1);
    h[i] = uint32_t(__bfloat16_as_ushort(h0)) | (uint32_t(__bfloat16_as_ushort(h1)) << 16);
    l[i] = uint32_t(__bfloat16_as_ushort(l0)) | (uint32_t(__bfloat16_as_ushort(l1)) << 16);
  }
  hi = make_uint4(h[0], h[1], h[2], h[3]);
  lo = make_uint4(l[0], l[1], l[2], l[3]);
}

// The round kernel: kTiles n-tiles of 8 rows per row group, kCols column tiles of 16 per block.
// Lane (g, t) = (lane / 4, lane % 4) holds weight rows g and g + 8 of each column tile and, for
// each row tile, x row g of the tile, which it splits itself (the same hi and lo as the split
// pass). Two column tiles a block (wide rounds) read each x piece for twice the weights: every
// block reads all of x, and at 16 rows and more x is most of what a launch moves.
// kPieces: how lanes get their pieces (the host picks; see Pieces).
template <int kTiles, int kCols, Pieces kPieces>
__global__ void __launch_bounds__(kMaxRuns * 32, 2)
    matmul_bf16_kernel(const float* __restrict__ x, const __nv_bfloat16* __restrict__ w, float* __restrict__ out,
                       int64_t k, int64_t m, MatmulRows rows) {
  allow_early_launch();
  using R = Ring<kTiles, kCols>;
  constexpr int kGroupRows = kTiles * 8;
  constexpr int kBlockCols = kTileCols * kCols;
  constexpr int kPartialRow = kGroupRows + 1;  // one column's partials, padded
  extern __shared__ uint4 ring_memory[];
  // The runs' partials, part(run, column, row): their own memory, or with two column tiles
  // (whose ring and partials would not fit two blocks an SM) the ring's, once every warp is done
  // with it.
  __shared__ float own_partial[kCols == 1 ? kMaxRuns : 1][kBlockCols][kPartialRow];
  float* ring_partial = reinterpret_cast<float*>(ring_memory);
  auto part = [&](int s, int column, int row) -> float& {
    if constexpr (kCols == 1)
      return own_partial[s][column][row];
    else
      return ring_partial[(s * kBlockCols + column) * kPartialRow + row];
  };
  const Runs runs = k_runs(k);
  const int run = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint4* ring = ring_memory + size_t(run) * R::kDepth * R::kPieces * 32 + lane;  // this lane's first place

  // Launched early (launch): the block is placed while the kernel ahead finishes, and
  // reads nothing until then.
  wait_for_inputs();
  // Plain launches: block (x, y) computes row group x of column tile y, so the blocks that
  // read one tile's weights are launched side by side and share them through L2. Grouped ones:
  // column tile x of group y, all of the group's rows in turn.
  const BlockRows mine = block_rows(rows, w, kGroupRows, blockIdx.x);
  const unsigned col_tile = rows.segments ? blockIdx.x : blockIdx.y;
  if (mine.first >= mine.last) return;  // the whole block leaves together
  const int64_t first = mine.first, last = mine.last;
  const __nv_bfloat16* w_group = mine.w;

  const int64_t col0 = int64_t(col_tile) * kBlockCols;
  // Where the lane's two pieces of block 0 are, per column tile: in its two weight rows, or
  // (packed) at its place in the tile's first 1 KB.
  const __nv_bfloat16 *w_a[kCols], *w_b[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    if constexpr (kPieces == Pieces::packed) {
      const int64_t tile = min64(col0 / kTileCols + c, m / kTileCols - 1);
      w_a[c] = w_group + size_t(tile) * size_t(k) * kTileCols + lane * 8;
      w_b[c] = w_a[c] + 256;
    } else {
      w_a[c] = w_group + size_t(min64(col0 + 16 * c + g, m - 1)) * size_t(k);
      w_b[c] = w_group + size_t(min64(col0 + 16 * c + g + 8, m - 1)) * size_t(k);
    }
  }
  const int b_begin = run * runs.per_run;
  const int b_end = min(runs.blocks, b_begin + runs.per_run);

  for (int64_t group = first; group < last; group += kGroupRows) {
    const int group_rows = int(min64(kGroupRows, last - group));
    const int tiles = kTiles == 1 ? 1 : (group_rows + 7) / 8;
    // This lane's x row in each tile (the last row stands in for rows past the end).
    const float* x_row[kTiles];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const int64_t entry = group + min(8 * j + g, group_rows - 1);
      x_row[j] = x + (rows.in_rows ? rows.in_rows[entry] : entry) * k;
    }
    // Stages block b (nothing past the run's end) into ring slot `slot`, as one copy group.
    auto stage = [&](int b, int slot) {
      uint4* place = ring + slot * R::kPieces * 32;
      const int64_t at = int64_t(b) * kBlockK + t * 8;
      const int64_t from = at < k ? at : 0;  // a piece at or past k copies no bytes (zeros) from a valid address
      // The pieces' offset from block 0's: along the rows, or (packed) 1 KB a block.
      const int64_t step = kPieces == Pieces::packed ? int64_t(b) * kBlockK * kTileCols : from;
      if (b < b_end) {
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          if constexpr (kPieces != Pieces::loads) {
            copy16(place + 64 * c, w_a[c] + step, at < k);
            copy16(place + 64 * c + 32, w_b[c] + step, at < k);
          } else {
            place[64 * c] = load_w8(w_a[c], at, k);
            place[64 * c + 32] = load_w8(w_b[c], at, k);
          }
        }
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
          if (j >= tiles) break;
          uint4* xp = place + 64 * kCols + 64 * j;
          if constexpr (kPieces != Pieces::loads) {
            copy16<true>(xp, x_row[j] + from, at < k);
            copy16<true>(xp + 32, x_row[j] + from + 4, at < k);
          } else {
            load_x8(x_row[j], at, k, xp[0], xp[32]);
          }
        }
      }
      commit_copies();
    };
#pragma unroll 1
    for (int s = 0; s < R::kDepth; ++s) stage(b_begin + s, s);

    float acc[kCols][kTiles][4];
#pragma unroll
    for (int c = 0; c < kCols; ++c)
#pragma unroll
      for (int j = 0; j < kTiles; ++j) acc[c][j][0] = acc[c][j][1] = acc[c][j][2] = acc[c][j][3] = 0.0f;
    int slot = 0;
    for (int b = b_begin; b < b_end; ++b) {
      wait_copies<R::kDepth - 1>();  // block b is in
      const uint4* place = ring + slot * R::kPieces * 32;
      // One column tile: its weights are read before the row tiles; two: each where it is used
      // (each the order measured; the sums are the same).
      uint4 wa[kCols], wb[kCols];
      if (kCols == 1) wa[0] = place[0], wb[0] = place[32];
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        if (j >= tiles) break;
        uint4 h, l;
        split_pieces(place[64 * kCols + 64 * j], place[64 * kCols + 32 + 64 * j], h, l);
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          if (kCols > 1) wa[c] = place[64 * c], wb[c] = place[64 * c + 32];
          mma(acc[c][j], wa[c].x, wb[c].x, wa[c].y, wb[c].y, h.x, h.y);
          mma(acc[c][j], wa[c].x, wb[c].x, wa[c].y, wb[c].y, l.x, l.y);
          mma(acc[c][j], wa[c].z, wb[c].z, wa[c].w, wb[c].w, h.z, h.w);
          mma(acc[c][j], wa[c].z, wb[c].z, wa[c].w, wb[c].w, l.z, l.w);
        }
      }
      // The slot's values are in registers and used: refill it kDepth blocks ahead.
      stage(b + R::kDepth, slot);
      slot = slot + 1 == R::kDepth ? 0 : slot + 1;
    }
    wait_copies<0>();  // the empty groups past the run's end
    if (kCols > 1) __syncthreads();  // every warp is done with the ring the partials take
    // acc[c][j]: columns 16c + g and 16c + g + 8, tile rows 2t and 2t + 1.
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        if (j >= tiles) break;
        part(run, 16 * c + g, 8 * j + 2 * t) = acc[c][j][0];
        part(run, 16 * c + g, 8 * j + 2 * t + 1) = acc[c][j][1];
        part(run, 16 * c + g + 8, 8 * j + 2 * t) = acc[c][j][2];
        part(run, 16 * c + g + 8, 8 * j + 2 * t + 1) = acc[c][j][3];
      }
    }
    __syncthreads();
    store_row_group(rows, out, m, col0, kBlockCols, group, group_rows, runs.count, part);
    if (group + kGroupRows < last) __syncthreads();  // the partials are read before the next group writes them
  }
}

// The fill kernel: the same sums, tiled through shared memory. A block owns 128 columns and 64
// rows of a row group; each of its warps 32 columns and 32 rows, and it walks all of k itself:
// at each run's first block its partials restart at zero, at the run's last block they join
// the total (total = p0, then total + p1, ...). Each mma gets the same weight and x fragments
// as in matmul_bf16_kernel, from tiles that cp.async stages kStages blocks ahead, so every
// output's bits equal that kernel's. Needs k % 8 == 0, 16-byte aligned weights and the split
// pass.
constexpr int kTiledCols = 128;
constexpr int kTiledRows = 64;
constexpr int kStages = 3;

struct TiledStage {
  __nv_bfloat16 w[kTiledCols][kBlockK];
  __nv_bfloat16 hi[kTiledRows][kBlockK];
  __nv_bfloat16 lo[kTiledRows][kBlockK];
};

// Two blocks an SM (128 registers a thread; 40 to 112 bytes spill), so that one
// block's mma steps cover the other's barrier and copy waits.
template <bool kPacked>
__global__ void __launch_bounds__(256, 2)
    matmul_bf16_tiled_kernel(const __nv_bfloat16* __restrict__ x_hi, const __nv_bfloat16* __restrict__ x_lo,
                             const __nv_bfloat16* __restrict__ w, float* __restrict__ out, int64_t k, int64_t m,
                             MatmulRows rows) {
  start_kernel();
  __shared__ TiledStage stages[kStages];
  const Runs runs = k_runs(k);
  const int64_t kpad = int64_t(runs.blocks) * kBlockK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int warp_col = (warp % 4) * 32, warp_row = (warp / 4) * 32;

  const BlockRows mine = block_rows(rows, w, kTiledRows, blockIdx.y);
  if (mine.first >= mine.last) return;  // the whole block leaves together
  const int64_t first = mine.first, last = mine.last;
  const __nv_bfloat16* w_group = mine.w;
  const int64_t col0 = int64_t(blockIdx.x) * kTiledCols;

  for (int64_t tile_row = first; tile_row < last; tile_row += kTiledRows) {
    const int tile_rows = int(min64(kTiledRows, last - tile_row));
    // Each thread stages two 16-byte pieces of the weight tile and one of each x tile.
    auto stage_block = [&](int b, TiledStage& st) {
      if (b < runs.blocks) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int piece = threadIdx.x + i * 256, row = piece / 4, part = piece % 4;
          const int64_t col = col0 + row, at = int64_t(b) * kBlockK + part * 8;
          const bool valid = col < m && at < k;
          copy16(&st.w[row][part * 8], w_group + (valid ? weight_at<kPacked>(col, at, k) : 0), valid);
          if (row >= kTiledRows) continue;  // the x tiles have half the weight tile's rows
          const bool in = row < tile_rows;
          const int64_t entry = tile_row + (in ? row : 0);
          const int64_t x_row = rows.in_rows ? rows.in_rows[entry] : entry;
          const size_t offset = size_t(x_row * kpad + int64_t(b) * kBlockK + part * 8);
          copy16(&st.hi[row][part * 8], x_hi + (in ? offset : 0), in);
          copy16(&st.lo[row][part * 8], x_lo + (in ? offset : 0), in);
        }
      }
      commit_copies();
    };
    __syncthreads();  // the previous tile's stages are read
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) stage_block(s, stages[s]);

    float acc[2][4][4], total[2][4][4];
    for (int b = 0; b < runs.blocks; ++b) {
      wait_copies<kStages - 2>();
      __syncthreads();  // block b is in; the stage block b - 1 used is free
      stage_block(b + kStages - 1, stages[(b + kStages - 1) % kStages]);
      const TiledStage& st = stages[b % kStages];
      const bool run_start = b % runs.per_run == 0;
      const bool run_end = b % runs.per_run == runs.per_run - 1 || b == runs.blocks - 1;
#pragma unroll
      for (int f = 0; f < 2; ++f) {
        const uint4 wa = *reinterpret_cast<const uint4*>(&st.w[warp_col + 16 * f + g][8 * t]);
        const uint4 wb = *reinterpret_cast<const uint4*>(&st.w[warp_col + 16 * f + g + 8][8 * t]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          // A fragment of rows past the tile's (a group's last tile) computes nothing that is
          // stored: skip its loads and mma (warp-uniform; the stored rows' sums are unchanged).
          if (warp_row + 8 * j >= tile_rows) continue;
          const uint4 h = *reinterpret_cast<const uint4*>(&st.hi[warp_row + 8 * j + g][8 * t]);
          const uint4 l = *reinterpret_cast<const uint4*>(&st.lo[warp_row + 8 * j + g][8 * t]);
          float (&d)[4] = acc[f][j];
          if (run_start) d[0] = d[1] = d[2] = d[3] = 0.0f;
          mma(d, wa.x, wb.x, wa.y, wb.y, h.x, h.y);
          mma(d, wa.x, wb.x, wa.y, wb.y, l.x, l.y);
          mma(d, wa.z, wb.z, wa.w, wb.w, h.z, h.w);
          mma(d, wa.z, wb.z, wa.w, wb.w, l.z, l.w);
          if (run_end) {
#pragma unroll
            for (int e = 0; e < 4; ++e) total[f][j][e] = b < runs.per_run ? d[e] : total[f][j][e] + d[e];
          }
        }
      }
    }
    wait_copies<0>();
    // total[f][j]: columns g and g + 8 of fragment f, rows 2t and 2t + 1 of row tile j.
#pragma unroll
    for (int f = 0; f < 2; ++f) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t col = col0 + warp_col + 16 * f + g + (e >= 2 ? 8 : 0);
          const int row = warp_row + 8 * j + 2 * t + (e % 2);
          if (col >= m || row >= tile_rows) continue;
          const int64_t entry = tile_row + row;
          store(rows, out, m, rows.out_rows ? rows.out_rows[entry] : entry, col, total[f][j][e]);
        }
      }
    }
  }
}

template <int kTiles, int kCols>
void launch_round(const float* x, const __nv_bfloat16* w, float* out, int64_t k, int64_t m, const MatmulRows& rows,
                  Launches& launches) {
  const bool async = k % 8 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                     rows.group_stride % 8 == 0;
  require(!rows.packed || async, "matmul: packed weights need 16-byte-aligned activations");
  const unsigned col_tiles = blocks_for(m, kTileCols * kCols);
  require(rows.segments || col_tiles <= 65535, "matmul: over 65535 column tiles");
  const dim3 grid = rows.segments ? dim3(col_tiles, unsigned(rows.groups)) : dim3(blocks_for(rows.n, kTiles * 8), col_tiles);
  const int warps = k_runs(k).count;
  const size_t ring = size_t(warps) * Ring<kTiles, kCols>::kWarpBytes;
  auto kernel = rows.packed ? matmul_bf16_kernel<kTiles, kCols, Pieces::packed>
                : async       ? matmul_bf16_kernel<kTiles, kCols, Pieces::copies>
                              : matmul_bf16_kernel<kTiles, kCols, Pieces::loads>;
  launch(kernel, grid, dim3(warps * 32), ring, launches, x, w, out, k, m, rows);
}

// Lets a round kernel have the ring of all kMaxRuns warps (over the 48 KB default).
template <int kTiles, int kCols>
void allow_ring() {
  const size_t ring = size_t(kMaxRuns) * Ring<kTiles, kCols>::kWarpBytes;
  for (auto kernel : {matmul_bf16_kernel<kTiles, kCols, Pieces::loads>, matmul_bf16_kernel<kTiles, kCols, Pieces::copies>,
                      matmul_bf16_kernel<kTiles, kCols, Pieces::packed>})
    LOCKSTEP_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(ring)));
}

}  // namespace

bool packable_bf16(int64_t rows, int64_t k, const void* w) {
  return rows % kTileCols == 0 && k % kBlockK == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

void launch_pack_bf16(const void* src, void* dst, int64_t rows, int64_t k, Launches& launches) {
  require(packable_bf16(rows, k, dst) && reinterpret_cast<uintptr_t>(src) % 16 == 0, "pack: shape not packable");
  launch(pack_kernel, blocks_for(rows * k / 8, 256), 256, 0, launches, static_cast<const uint4*>(src),
         static_cast<uint4*>(dst), rows, k);
}

void prepare_matmul_bf16() {
  prepare_matmul_bf16_row();
  prepare_matmul_bf16_wgmma();
  allow_ring<1, 1>();
  allow_ring<2, 1>();
  allow_ring<2, 2>();
}

size_t matmul_bf16_workspace_bytes(const MatmulRows& rows, int64_t k) {
  const int64_t split = gathered_split(rows) ? std::max(rows.n, rows.x_rows) : rows.x_rows;
  return size_t(2) * size_t(split) * size_t(padded_k(k)) * sizeof(__nv_bfloat16);
}

void launch_matmul_bf16(const float* x, const void* w, float* out, int64_t k, int64_t m, const MatmulRows& rows,
                        void* workspace, Launches& launches) {
  const auto* weights = static_cast<const __nv_bfloat16*>(w);
  // The rows a group holds on average (the list's entries over the groups launched).
  const int64_t typical = rows.segments ? (rows.n + rows.groups - 1) / rows.groups : rows.n;
  const bool fill_sized = rows.segments ? typical >= fill_group_rows() : rows.n >= fill_rows();
  // Fill-sized launches take the shared-memory tiles of the wgmma or the tiled kernel (the same
  // sums; see the kernels), which need the split pass, k % 8 == 0 and aligned weights; every
  // other launch the round kernel, which splits x itself.
  if (!fill_sized || k % 8 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0) {
    if (launch_matmul_bf16_row(x, weights, out, k, m, rows, launches)) return;
    // 8- or 16-row groups: by the launch's rows, or by the rows a group has on average (a
    // 24-stream round's experts get about two each, far fewer than a group can have).
    if (typical <= 8) return launch_round<1, 1>(x, weights, out, k, m, rows, launches);
    // Plain launches of more rows: two column tiles a block, so x is staged once for both.
    if (rows.segments) return launch_round<2, 1>(x, weights, out, k, m, rows, launches);
    return launch_round<2, 2>(x, weights, out, k, m, rows, launches);
  }
  const int64_t kpad = padded_k(k);
  const bool gather = gathered_split(rows);
  const int64_t split_rows = gather ? rows.n : rows.x_rows;
  require(2 * split_rows * kpad < (int64_t(1) << 32), "matmul: over 2^31 split activations");
  auto* hi = static_cast<__nv_bfloat16*>(workspace);
  __nv_bfloat16* lo = hi + split_rows * kpad;
  if (gather) {
    launch(split_kernel<true>, blocks_for(split_rows * kpad, 256), 256, 0, launches, x, rows.in_rows, rows.x_rows,
           split_rows, k, kpad, hi, lo);
    MatmulRows listed = rows;
    listed.in_rows = nullptr;
    listed.x_rows = split_rows;
    return launch_matmul_bf16_wgmma(hi, lo, weights, out, k, m, listed, launches);
  }
  const bool wgmma = wgmma_fills_on();
  launch(wgmma ? split_kernel<true> : split_kernel<false>, blocks_for(rows.x_rows * kpad, 256), 256, 0, launches, x,
         static_cast<const int32_t*>(nullptr), rows.x_rows, rows.x_rows, k, kpad, hi, lo);
  if (wgmma) return launch_matmul_bf16_wgmma(hi, lo, weights, out, k, m, rows, launches);
  dim3 grid(blocks_for(m, kTiledCols), rows.segments ? unsigned(rows.groups) : blocks_for(rows.n, kTiledRows));
  launch(rows.packed ? matmul_bf16_tiled_kernel<true> : matmul_bf16_tiled_kernel<false>, grid, 256, 0, launches, hi, lo,
         weights, out, k, m, rows);
}

}  // namespace lockstep::cuda
