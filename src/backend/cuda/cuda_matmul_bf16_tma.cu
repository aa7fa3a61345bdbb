// The wgmma fill kernel fed by the tensor memory accelerator (TMA): cuda_matmul_bf16_wgmma.cu's
// sums, bit for bit (the same steps on the same slots, runs joined in run order), with x's tiles
// brought by bulk tensor copies instead of every thread's cp.async, and no block-wide barrier.
// It takes packed weights and x read in list order (no in_rows): the launches of dense fills
// and of the experts' second matmul. The rest take the wgmma kernel.
//
// The pipeline, per block of k (j counts them over the block's tiles; stage j % kRing):
// - thread 0 waits until every warp is done with the stage's x (empty[s]: each warp arrives
//   once its steps on it have finished), expects 16 KB on full[s] and starts four copies (hi
//   and lo, two 64-row boxes each), kAhead blocks ahead;
// - each warp copies its own 16 columns' weights (one packed 1 KB piece; each lane the 32 bytes
//   it later reads as its A fragments) with cp.async, kAhead blocks ahead, and waits for them
//   with cp.async.wait_group;
// - everyone waits on full[s], runs the block's four steps, and once the steps before have
//   finished (wgmma.wait_group 1) releases their stage.
// x lands in the 64-byte swizzle (rows of 32 slots), which the steps' descriptors name.
//
// Measured on an H100 (docs/gpu-performance.md, session 45): 8192-token fills 1.18x (13 layers)
// and 1.16x (30B shape) the wgmma kernel's rate. Clusters of 2 and 4 blocks sharing x's copies
// (multicast) were slower (0.94x and less of this kernel's rate) and were dropped.
// LOCKSTEP_CUDA_WGMMA_TMA=0 runs the wgmma kernel for every launch.
#include <cuda.h>

#include "backend/cuda/cuda_matmul_bf16.cuh"
#include "backend/cuda/cuda_wgmma.cuh"

namespace lockstep::cuda::bf16 {

namespace {

constexpr int kCols = 128;  // weight columns a block: 8 warps of 16
constexpr int kRows = 128;  // x rows a block (the wgmma's N)
constexpr int kThreads = 256;
constexpr int kPiece = kBlockK * kTileCols;  // a packed weight piece: 16 columns x 32 positions
constexpr int kRing = 8;                     // stages
constexpr int kAhead = kRing - 2;  // blocks of k copied ahead (the one before the current may still be read)

// One stage: each warp's packed weight piece as stored, and x's hi and lo as the bulk copies
// land them: [row][32 slots], 64 bytes a row, in the 64-byte swizzle (the 16-byte pieces of a
// row permuted by bits of its address, which the wgmma descriptors name).
struct Stage {
  __nv_bfloat16 w[kCols / kTileCols][kPiece];
  __nv_bfloat16 hi[kRows][kBlockK];
  __nv_bfloat16 lo[kRows][kBlockK];
};
constexpr int kBoxRows = 64;  // x comes in four boxes a stage: hi and lo, two halves each
struct Shared {
  Stage stages[kRing];
  uint64_t full[kRing];   // the stage's x has landed
  uint64_t empty[kRing];  // every warp is done with the stage's x
};
constexpr uint32_t kXBytes = 2 * sizeof(Stage::hi);

// The descriptor of x's step half h (slots 16h ..): 64-byte swizzle, 8-row groups 512 bytes
// apart, starting 32h bytes into the rows.
__device__ inline uint64_t x_matrices(const __nv_bfloat16 (&x)[kRows][kBlockK], int h) {
  return wgmma_matrices_swizzled_64(&x[0][16 * h], 8 * sizeof(x[0]));
}

__global__ void __launch_bounds__(kThreads, 1)
    matmul_bf16_tma_kernel(const __grid_constant__ CUtensorMap hi_map, const __grid_constant__ CUtensorMap lo_map,
                           const __nv_bfloat16* __restrict__ w, float* __restrict__ out, int64_t k, int64_t m,
                           MatmulRows rows) {
  start_kernel();
  extern __shared__ __align__(1024) unsigned char shared_bytes[];
  Shared& sh = *reinterpret_cast<Shared*>(shared_bytes);
  const Runs runs = k_runs(k);  // k % 32 == 0 (packed weights)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  const BlockRows mine = block_rows(rows, w, kRows, blockIdx.y);
  if (mine.first >= mine.last) return;  // the whole block leaves together
  if (threadIdx.x == 0) {
    for (int s = 0; s < kRing; ++s) barrier_init(&sh.full[s], 1), barrier_init(&sh.empty[s], kThreads / 32);
    barrier_init_fence();
  }
  __syncthreads();

  const int64_t col0 = int64_t(blockIdx.x) * kCols, warp_col = col0 + warp * kTileCols;
  const bool warp_in = warp_col < m;  // m % 16 == 0: a warp's columns are all in or all out
  const __nv_bfloat16* w_piece = mine.w + (warp_in ? (warp_col / kTileCols) * runs.blocks * int64_t(kPiece) : 0);

  // Block b of k (fill j of the block) into stage j % kRing: the weights by every warp, x by
  // thread 0.
  auto copy_weights = [&](int b, int64_t j) {
    if (b < runs.blocks) {
      Stage& st = sh.stages[j % kRing];
      const __nv_bfloat16* from = w_piece + int64_t(b) * kPiece;
      copy16(&st.w[warp][lane * 8], from + lane * 8, warp_in);
      copy16(&st.w[warp][kPiece / 2 + lane * 8], from + kPiece / 2 + lane * 8, warp_in);
    }
    commit_copies();  // a group each call, so the waits count blocks
  };
  auto copy_x = [&](int b, int64_t j, int64_t tile_row) {
    const int s = int(j % kRing);
    if (j >= kRing) barrier_wait(&sh.empty[s], uint32_t(j / kRing - 1) & 1);
    barrier_expect(&sh.full[s], kXBytes);
    Stage& st = sh.stages[s];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int c0 = b * kBlockK, c1 = int(tile_row) + half * kBoxRows;
      tensor_copy(st.hi[half * kBoxRows], &hi_map, c0, c1, &sh.full[s]);
      tensor_copy(st.lo[half * kBoxRows], &lo_map, c0, c1, &sh.full[s]);
    }
  };
  auto release = [&](int64_t j) {
    if (lane == 0) barrier_arrive(&sh.empty[j % kRing]);
  };

  int64_t fills = 0;  // blocks of k of the earlier tiles
  for (int64_t tile_row = mine.first; tile_row < mine.last; tile_row += kRows, fills += runs.blocks) {
    const int tile_rows = int(min64(kRows, mine.last - tile_row));
    for (int b = 0; b < kAhead; ++b) {
      if (threadIdx.x == 0 && b < runs.blocks) copy_x(b, fills + b, tile_row);
      copy_weights(b, fills + b);
    }
    __syncwarp();

    float acc[64], total[64];
    // Block b's four steps on acc, as in the wgmma kernel, committed as one group.
    auto steps = [&](const Stage& st, uint4 (&f)[2]) {
      f[0] = *reinterpret_cast<const uint4*>(&st.w[warp][lane * 8]);
      f[1] = *reinterpret_cast<const uint4*>(&st.w[warp][kPiece / 2 + lane * 8]);
      wgmma_fence();
      wgmma_step(acc, f[0].x, f[1].x, f[0].y, f[1].y, x_matrices(st.hi, 0));
      wgmma_step(acc, f[0].x, f[1].x, f[0].y, f[1].y, x_matrices(st.lo, 0));
      wgmma_step(acc, f[0].z, f[1].z, f[0].w, f[1].w, x_matrices(st.hi, 1));
      wgmma_step(acc, f[0].z, f[1].z, f[0].w, f[1].w, x_matrices(st.lo, 1));
      wgmma_commit();
    };
    auto block = [&](int b, uint4 (&f)[2], uint4 (&running)[2]) {
      const int64_t j = fills + b;
      if (threadIdx.x == 0 && b + kAhead < runs.blocks) copy_x(b + kAhead, j + kAhead, tile_row);
      __syncwarp();
      copy_weights(b + kAhead, j + kAhead);
      wait_copies<kAhead>();  // this lane's weights of block b are in
      barrier_wait(&sh.full[j % kRing], uint32_t(j / kRing) & 1);
      steps(sh.stages[j % kRing], f);
      wgmma_wait<1>();  // block b - 1's steps are done
      keep(running[0]), keep(running[1]);
      if (b > 0) release(j - 1);
    };
    wgmma_runs(runs, acc, total, block);
    release(fills + runs.blocks - 1);
    wait_copies<0>();
    store_wgmma_tile(rows, out, m, warp_col, tile_row, tile_rows, total);
  }
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's cuTensorMapEncodeTiled, through the runtime (lockstep does not link libcuda).
EncodeTiled encode_tiled() {
  static const EncodeTiled encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    LOCKSTEP_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    require(found == cudaDriverEntryPointSuccess && fn != nullptr, "matmul: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<EncodeTiled>(fn);
  }();
  return encode;
}

// x's hi or lo, rows of kpad slots, as a tensor of boxes of 64 rows by 32 slots, landing in
// the 64-byte swizzle (rows past the last read as zero).
CUtensorMap x_map(const __nv_bfloat16* x, int64_t x_rows, int64_t kpad) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(kpad), cuuint64_t(x_rows)};
  const cuuint64_t strides[1] = {cuuint64_t(kpad) * sizeof(__nv_bfloat16)};
  const cuuint32_t box[2] = {kBlockK, kBoxRows}, unit[2] = {1, 1};
  const CUresult made = encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<__nv_bfloat16*>(x), dims,
                                       strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_64B,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  require(made == CUDA_SUCCESS, "matmul: cuTensorMapEncodeTiled failed");
  return map;
}


}  // namespace

void prepare_matmul_bf16_tma() {
  LOCKSTEP_CUDA(cudaFuncSetAttribute(matmul_bf16_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(sizeof(Shared))));
}

bool launch_matmul_bf16_tma(const __nv_bfloat16* hi, const __nv_bfloat16* lo, const __nv_bfloat16* w, float* out,
                            int64_t k, int64_t m, const MatmulRows& rows, Launches& launches) {
  static const bool on = !switched_off("LOCKSTEP_CUDA_WGMMA_TMA");
  // Packed weights (k % 32 == 0, m % 16 == 0), x in list order, coordinates within int32.
  if (!on || !rows.packed || rows.in_rows || k >= (int64_t(1) << 31) || rows.x_rows >= (int64_t(1) << 31))
    return false;
  const dim3 grid(blocks_for(m, kCols), rows.segments ? unsigned(rows.groups) : blocks_for(rows.n, kRows));
  launch(matmul_bf16_tma_kernel, grid, kThreads, sizeof(Shared), launches, x_map(hi, rows.x_rows, k),
         x_map(lo, rows.x_rows, k), w, out, k, m, rows);
  return true;
}

}  // namespace lockstep::cuda::bf16
