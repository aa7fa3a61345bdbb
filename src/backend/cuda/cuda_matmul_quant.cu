// The quantized matmul for rounds (launches of few rows a weight): the sums of cuda_matmul.cu's
// kernel, in its order (k cut into chunks of 256, lane l owning positions 8l .. 8l+7 of each,
// one fused multiply-add a product chunk by chunk, then the butterfly), so the bits are the
// same whichever kernel a launch takes.
//
// What differs is how the weights arrive. A quantized row is a few hundred bytes to a few KB
// (values, scales, biases: one contiguous run), so a block copies the whole of its columns'
// rows into shared memory at once with cp.async, every copy in flight together; a plain launch
// sends them before it waits for the kernel ahead, since which weights it reads hangs on no
// kernel's output. The warps then decode from shared memory (the same load8 as from global
// memory) and read x through L1, each decoded chunk used for every row of the tile. Where
// cuda_matmul.cu's kernel keeps a few 4-byte weight loads in flight a lane, this one keeps the
// launch's whole weight read in flight, which is what a round's small matrices need.
#include <type_traits>

#include "backend/cuda/cuda_matmul.cuh"
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_quant.cuh"

namespace lockstep::cuda {

namespace {

constexpr int kChunk = 256;  // k positions a warp step: 32 lanes x 8 (cuda_matmul.cu's order)
// Rows a warp sums at once (a tile): 1, 4 or 8, the fewest that hold a launch's rows (a
// group's, for the experts). Fewer rows, fewer registers, so more blocks' copies in flight
// on each SM; a row's sums are the same whatever the tile.
constexpr int kRowTiles[] = {1, 4, 8};
constexpr int kWarps = 4;
constexpr size_t kMaxStaged = 96 * 1024;  // shared memory a block may take for its rows
// Room past the rows: the copy starts up to 15 bytes before them (at a 16-byte boundary) and
// its last piece, zero-filled to 16 bytes, may end up to 15 bytes past them.
constexpr size_t kMargin = 32;

// Copies bytes [src, src + bytes) of global memory to dst + src % 16 (dst 16-byte aligned) in
// 16-byte pieces across the block, starting at the 16-byte boundary at or before src (inside
// the same allocation, which starts aligned); nothing past src + bytes is read, but the last
// piece is zero-filled to 16 bytes in dst (kMargin). The caller waits (wait_all_copies).
__device__ inline void copy_rows(uint8_t* dst, const uint8_t* src, size_t bytes) {
  const int lead = int(reinterpret_cast<uintptr_t>(src) % 16);
  const uint8_t* from = src - lead;
  const size_t total = bytes + size_t(lead);
  const unsigned address = unsigned(__cvta_generic_to_shared(dst));
  for (size_t at = size_t(threadIdx.x) * 16; at < total; at += size_t(blockDim.x) * 16) {
    const unsigned size = unsigned(total - at < 16 ? total - at : 16);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address + unsigned(at)), "l"(from + at),
                 "r"(size)
                 : "memory");
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

__device__ inline void wait_all_copies() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// A block owns kWarps * kColsPerWarp columns; warp w computes columns w * kColsPerWarp .. of
// them, for every row of its group, in tiles of 8 rows.
template <QuantKind kKind, int kColsPerWarp, int kRowTile>
__global__ void __launch_bounds__(kWarps * 32)
    matmul_quant_rows_kernel(const float* __restrict__ x, const QuantWeights<kKind> w, float* __restrict__ out,
                             int64_t k, int64_t m, MatmulRows rows) {
  constexpr int kBlockCols = kWarps * kColsPerWarp;
  allow_early_launch();
  extern __shared__ __align__(16) uint8_t staged[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t col0 = int64_t(blockIdx.x) * kBlockCols;
  const int block_cols = int(min64(kBlockCols, m - col0));

  int64_t group = 0, first = 0, last = rows.n;
  const uint8_t* src = nullptr;
  if (!rows.segments) {
    // Which weights a plain launch reads hangs on nothing: they go out before the wait.
    src = w.row(0, 0, col0, k);
    copy_rows(staged, src, size_t(block_cols) * w.row_bytes);
    wait_for_inputs();
  } else {
    wait_for_inputs();
    group = launched_group(rows);
    if (group < 0) return;  // the whole block leaves together
    first = rows.segments[group], last = rows.segments[group + 1];
    if (first >= last) return;
    src = w.row(group, rows.group_stride, col0, k);
    copy_rows(staged, src, size_t(block_cols) * w.row_bytes);
  }
  wait_all_copies();
  __syncthreads();

  const int lead = int(reinterpret_cast<uintptr_t>(src) % 16);
  const int c0 = warp * kColsPerWarp;
  if (c0 >= block_cols) return;  // no barrier follows
  const uint8_t* w_rows[kColsPerWarp];
#pragma unroll
  for (int c = 0; c < kColsPerWarp; ++c) w_rows[c] = staged + lead + size_t(min(c0 + c, block_cols - 1)) * w.row_bytes;
  const bool vector_ok = k % 8 == 0;
  for (int64_t tile = first; tile < last; tile += kRowTile) {
    const int tile_rows = int(min64(kRowTile, last - tile));
    const float* x_rows[kRowTile];
    tile_x_rows(x, rows, tile, tile_rows, k, x_rows);
    float acc[kColsPerWarp][kRowTile] = {};  // each lane's partial sums
    for (int64_t chunk = 0; chunk < k; chunk += kChunk) {
      const int64_t at = chunk + lane * 8;
      float wv[kColsPerWarp][8];
#pragma unroll
      for (int c = 0; c < kColsPerWarp; ++c) w.load8(w_rows[c], at, k, wv[c]);
#pragma unroll
      for (int r = 0; r < kRowTile; ++r) {
        if (r >= tile_rows) break;
        float xv[8];
        load_f32x8(x_rows[r], at, k, vector_ok, xv);
#pragma unroll
        for (int c = 0; c < kColsPerWarp; ++c)
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[c][r] = __fmaf_rn(wv[c][i], xv[i], acc[c][r]);
      }
    }
    store_tile(rows, out, m, acc, tile, tile_rows, col0 + c0, lane);
  }
}

template <QuantKind kKind, int kColsPerWarp, int kRowTile>
void launch_rows(const float* x, const QuantView& view, float* out, int64_t k, int64_t m, const MatmulRows& rows,
                 Launches& launches) {
  QuantWeights<kKind> weights;
  static_cast<QuantView&>(weights) = view;
  constexpr int kBlockCols = kWarps * kColsPerWarp;
  const dim3 grid(blocks_for(m, kBlockCols), unsigned(rows.segments ? rows.groups : 1));
  const size_t bytes = size_t(kBlockCols) * view.row_bytes + kMargin;
  launch(matmul_quant_rows_kernel<kKind, kColsPerWarp, kRowTile>, grid, kWarps * 32, bytes, launches, x, weights, out,
         k, m, rows);
}

// Calls use(std::integral_constant<int, tile>) for each row tile of kRowTiles.
template <class Use>
void for_each_row_tile(Use&& use) {
  use(std::integral_constant<int, kRowTiles[0]>{});
  use(std::integral_constant<int, kRowTiles[1]>{});
  use(std::integral_constant<int, kRowTiles[2]>{});
}

}  // namespace

bool launch_matmul_quant_rows(const float* x, QuantKind kind, const QuantView& view, float* out, int64_t k, int64_t m,
                              const MatmulRows& rows, Launches& launches) {
  // Rounds: a plain launch of up to 16 rows, or a grouped one of up to 16 a group (the
  // experts of a round), and rows that fit shared memory four columns at a time.
  const bool few_rows = rows.segments ? rows.max_group_rows <= 16 : rows.n <= 16;
  const bool fits = view.row_bytes * kWarps + kMargin <= kMaxStaged;
  if (!few_rows || !fits || reinterpret_cast<uintptr_t>(view.data) % 16 != 0) return false;
  // Two columns a warp where they fit and the launch still has a block for every SM or so.
  const bool two = view.row_bytes * 2 * kWarps + kMargin <= kMaxStaged && m >= 2 * kWarps * 2 * 132;
  const int64_t most_rows = rows.segments ? rows.max_group_rows : rows.n;
  const int tile = most_rows <= 1 ? 1 : most_rows <= 4 ? 4 : 8;
  with_quant_kind(kind, [&](auto c) {
    for_each_row_tile([&](auto t) {
      constexpr QuantKind kKind = decltype(c)::value;
      constexpr int kTile = decltype(t)::value;
      if (kTile != tile) return;
      if (two)
        launch_rows<kKind, 2, kTile>(x, view, out, k, m, rows, launches);
      else
        launch_rows<kKind, 1, kTile>(x, view, out, k, m, rows, launches);
    });
  });
  return true;
}

void prepare_matmul_quant() {
  for (QuantKind kind : {QuantKind::q8_0, QuantKind::q4_0, QuantKind::q4_1, QuantKind::q5_0, QuantKind::q5_1,
                         QuantKind::iq4_nl, QuantKind::q4_k, QuantKind::q5_k, QuantKind::q6_k,
                         QuantKind::affine2, QuantKind::affine3, QuantKind::affine4, QuantKind::affine5,
                         QuantKind::affine6, QuantKind::affine8, QuantKind::fp8})
    with_quant_kind(kind, [](auto c) {
      for_each_row_tile([&](auto t) {
        constexpr QuantKind kKind = decltype(c)::value;
        constexpr int kTile = decltype(t)::value;
        LOCKSTEP_CUDA(cudaFuncSetAttribute(matmul_quant_rows_kernel<kKind, 1, kTile>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMaxStaged)));
        LOCKSTEP_CUDA(cudaFuncSetAttribute(matmul_quant_rows_kernel<kKind, 2, kTile>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMaxStaged)));
      });
    });
}

}  // namespace lockstep::cuda
