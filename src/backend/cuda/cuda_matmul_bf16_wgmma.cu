// The fill matmul for bf16 weights on Hopper's warpgroup mma (wgmma, sm_90a): the sums of
// cuda_matmul_bf16.cu's header, bit for bit, at a higher rate than the tiled mma.sync kernel.
//
// A block owns 128 weight columns and 128 rows of x; each of its two warpgroups takes 64
// columns, each of their warps 16 (the A operand, from registers, in mma.sync's fragment
// layout: the weights' columns are the mma's M), and all 128 rows (the B operand, N = 128, from
// shared memory). A k block of 32 is four wgmma steps on one accumulator, in the other kernels'
// order: the block's first half against hi, then lo, then its second half likewise, each
// position in the same slot as there (lane t's 8t .. 8t + 3 at slots 2t, 2t + 1, 2t + 8,
// 2t + 9 of the first half). The split pass writes x's hi and lo in that slot order (slot_of),
// so each step's 16 slots are 32 contiguous bytes a row and cp.async copies them as they are.
// Runs start at zero and join the total in run order, as in the tiled kernel.
//
// The bits equal the other kernels' because a wgmma step of 16 slots rounds as an mma.sync step
// of the same slots does (tools/wgmma_probe, on an H100: 64 chained steps of values with spread
// exponents, all 512 outputs the same bits), and the tests check it where it matters:
// `OpInvariance` and `MoeOps` compare fill-sized launches (256 and 300 rows, experts with up to
// 900) with rows alone, which take the round kernels. LOCKSTEP_CUDA_WGMMA=0 runs the tiled kernel instead.
//
// Overlapped: a block's steps run on while the next block's copies land and its fragments load
// (wgmma.wait_group 1), and only a run's end waits for all of its steps. Launches with packed
// weights and x in list order go on to cuda_matmul_bf16_tma.cu, the same steps fed by bulk
// tensor copies; the ones left here are the experts' first matmuls (x gathered by in_rows) and
// unpacked weights.
#include "backend/cuda/cuda_matmul_bf16.cuh"
#include "backend/cuda/cuda_wgmma.cuh"

namespace lockstep::cuda::bf16 {

namespace {

constexpr int kCols = 128;   // weight columns a block
constexpr int kRows = 128;   // x rows a block (the wgmma's N)
constexpr int kThreads = 256;

// One stage, a block of k: the weight tile [column][32 positions] as stored, and x's hi and lo
// in the wgmma's core matrices: for step half h, row group n / 8 and slot half s, 8 rows of 16
// bytes.
struct Stage {
  __nv_bfloat16 w[kCols][kBlockK];
  __nv_bfloat16 hi[2][kRows / 8][2][8][8];
  __nv_bfloat16 lo[2][kRows / 8][2][8][8];
};
// The stages a block cycles through: the one being multiplied, the one before it (whose last
// steps may still run) and three blocks of copies ahead.
constexpr int kRing = 5;
constexpr int kAhead = kRing - 2;
constexpr size_t kSharedBytes = size_t(kRing) * sizeof(Stage);

// The descriptor of a stage's x: 8 x 8 core matrices with no swizzle, the two slot halves 128
// bytes apart, the row groups 256.
__device__ inline uint64_t core_matrices(const void* tile) { return wgmma_matrices(tile, 128, 256); }

template <bool kPacked>
__global__ void __launch_bounds__(kThreads, 1)
    matmul_bf16_wgmma_kernel(const __nv_bfloat16* __restrict__ x_hi, const __nv_bfloat16* __restrict__ x_lo,
                             const __nv_bfloat16* __restrict__ w, float* __restrict__ out, int64_t k, int64_t m,
                             MatmulRows rows) {
  start_kernel();
  extern __shared__ __align__(128) unsigned char shared[];
  Stage* stages = reinterpret_cast<Stage*>(shared);
  const Runs runs = k_runs(k);
  const int64_t kpad = int64_t(runs.blocks) * kBlockK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int warp_col = warp * 16;  // warpgroup warp / 4 takes columns 64 (warp / 4) ..

  const BlockRows mine = block_rows(rows, w, kRows, blockIdx.y);
  if (mine.first >= mine.last) return;  // the whole block leaves together
  const int64_t col0 = int64_t(blockIdx.x) * kCols;
  // A block of k further on in the weights: 32 positions along a row, or one packed 1 KB piece.
  constexpr int64_t kWeightStep = kPacked ? kBlockK * kTileCols : kBlockK;

  for (int64_t tile_row = mine.first; tile_row < mine.last; tile_row += kRows) {
    const int tile_rows = int(min64(kRows, mine.last - tile_row));
    // Each thread copies two 16-byte pieces of each block's weight tile and two of each x tile,
    // the same pieces of every block: piece i is row (or column) piece / 4, positions 8 (piece %
    // 4) on, which for x is step half part / 2, slot half part % 2. Their block 0 addresses:
    const __nv_bfloat16 *w_from[2], *hi_from[2], *lo_from[2];
    bool col_in[2], row_in[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int piece = threadIdx.x + i * kThreads, row = piece / 4, part = piece % 4;
      const int64_t col = col0 + row;
      col_in[i] = col < m;
      w_from[i] = mine.w + (col_in[i] ? weight_at<kPacked>(col, part * 8, k) : 0);
      row_in[i] = row < tile_rows;
      const int64_t entry = tile_row + (row_in[i] ? row : 0);
      const int64_t x_row = rows.in_rows ? rows.in_rows[entry] : entry;
      hi_from[i] = x_hi + (row_in[i] ? size_t(x_row * kpad + part * 8) : 0);
      lo_from[i] = x_lo + (row_in[i] ? size_t(x_row * kpad + part * 8) : 0);
    }
    auto stage_copies = [&](int b, Stage& st) {
      if (b < runs.blocks) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int piece = threadIdx.x + i * kThreads, row = piece / 4, part = piece % 4;
          const bool valid = col_in[i] && int64_t(b) * kBlockK + part * 8 < k;
          copy16(&st.w[row][part * 8], w_from[i] + (valid ? b * kWeightStep : 0), valid);
          const size_t x_at = row_in[i] ? size_t(b) * kBlockK : 0;
          copy16(&st.hi[part / 2][row / 8][part % 2][row % 8][0], hi_from[i] + x_at, row_in[i]);
          copy16(&st.lo[part / 2][row / 8][part % 2][row % 8][0], lo_from[i] + x_at, row_in[i]);
        }
      }
      commit_copies();
    };
    __syncthreads();  // the previous tile's stages are read
#pragma unroll
    for (int s = 0; s < kAhead; ++s) stage_copies(s, stages[s]);

    float acc[64], total[64];
    // Block b's four steps on acc, committed as one group: the weights from its stage into this
    // warp's A fragments f (columns g and g + 8), x's hi and lo by descriptor.
    auto steps = [&](int b, uint4 (&f)[2]) {
      const Stage& st = stages[b % kRing];
      f[0] = *reinterpret_cast<const uint4*>(&st.w[warp_col + g][8 * t]);
      f[1] = *reinterpret_cast<const uint4*>(&st.w[warp_col + g + 8][8 * t]);
      wgmma_fence();
      wgmma_step(acc, f[0].x, f[1].x, f[0].y, f[1].y, core_matrices(&st.hi[0]));
      wgmma_step(acc, f[0].x, f[1].x, f[0].y, f[1].y, core_matrices(&st.lo[0]));
      wgmma_step(acc, f[0].z, f[1].z, f[0].w, f[1].w, core_matrices(&st.hi[1]));
      wgmma_step(acc, f[0].z, f[1].z, f[0].w, f[1].w, core_matrices(&st.lo[1]));
      wgmma_commit();
    };
    // Block b's A fragments go to set f: block b - 1's steps still read the other set,
    // `running`, which `keep` holds until wgmma_wait<1> says they are done.
    auto block = [&](int b, uint4 (&f)[2], uint4 (&running)[2]) {
      wait_copies<kAhead - 1>();
      fence_async_shared();
      __syncthreads();  // block b is in; block b - 2's stage is free (its steps were waited on)
      stage_copies(b + kAhead, stages[(b + kAhead) % kRing]);
      steps(b, f);
      wgmma_wait<1>();  // block b - 1's steps are done
      keep(running[0]), keep(running[1]);
    };
    wgmma_runs(runs, acc, total, block);
    wait_copies<0>();
    store_wgmma_tile(rows, out, m, col0 + warp_col, tile_row, tile_rows, total);
  }
}

}  // namespace

bool wgmma_fills_on() {
  // Only sm_90a code has the kernel: on another GPU the build's portable PTX would trap.
  static const bool on = [] {
    int device = 0, major = 0, minor = 0;
    LOCKSTEP_CUDA(cudaGetDevice(&device));
    LOCKSTEP_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    LOCKSTEP_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return major == 9 && minor == 0 && !switched_off("LOCKSTEP_CUDA_WGMMA");
  }();
  return on;
}

void prepare_matmul_bf16_wgmma() {
  if (!wgmma_fills_on()) return;  // (which also reads the device's kind here, outside any capture)
  prepare_matmul_bf16_tma();
  for (auto kernel : {matmul_bf16_wgmma_kernel<false>, matmul_bf16_wgmma_kernel<true>})
    LOCKSTEP_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSharedBytes)));
}

void launch_matmul_bf16_wgmma(const __nv_bfloat16* hi, const __nv_bfloat16* lo, const __nv_bfloat16* w, float* out,
                              int64_t k, int64_t m, const MatmulRows& rows, Launches& launches) {
  if (launch_matmul_bf16_tma(hi, lo, w, out, k, m, rows, launches)) return;
  const dim3 grid(blocks_for(m, kCols), rows.segments ? unsigned(rows.groups) : blocks_for(rows.n, kRows));
  launch(rows.packed ? matmul_bf16_wgmma_kernel<true> : matmul_bf16_wgmma_kernel<false>, grid, kThreads, kSharedBytes,
         launches, hi, lo, w, out, k, m, rows);
}

}  // namespace lockstep::cuda::bf16
