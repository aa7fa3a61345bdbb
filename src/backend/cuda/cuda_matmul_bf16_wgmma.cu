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
// Not yet overlapped: each block's steps are waited on before the next block's start (so the
// stage they read can be refilled), and only the copies run ahead, three blocks deep. The
// overlapped form (kOverlap, LOCKSTEP_CUDA_WGMMA_OVERLAP=1) is an experiment that has not run on
// a GPU yet: the next device call A/Bs it and runs the tests with it, then keeps one form.
#include <cstdlib>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_matmul_bf16.cuh"

namespace lockstep::cuda::bf16 {

namespace {

constexpr int kCols = 128;   // weight columns a block
constexpr int kRows = 128;   // x rows a block (the wgmma's N)
constexpr int kThreads = 256;

// One stage: the weight tile [column][32 positions] as stored, and x's hi and lo in the wgmma's
// core matrices: for step half h, row group n / 8 and slot half s, 8 rows of 16 bytes.
struct Stage {
  __nv_bfloat16 w[kCols][kBlockK];
  __nv_bfloat16 hi[2][kRows / 8][2][8][8];
  __nv_bfloat16 lo[2][kRows / 8][2][8][8];
};
// The stages a block cycles through: the block being multiplied, the one before it (whose steps
// may still run, with kOverlap), and the copies ahead.
template <bool kOverlap>
constexpr int kStages = kOverlap ? 5 : 4;
template <bool kOverlap>
constexpr size_t kSharedBytes = size_t(kStages<kOverlap>) * sizeof(Stage);

// The shared-memory matrix descriptor of 8 x 8 core matrices with no swizzle: the two slot
// halves 128 bytes apart, the row groups 256.
__device__ inline uint64_t core_matrices(const void* tile) {
  const uint32_t address = uint32_t(__cvta_generic_to_shared(tile));
  constexpr uint64_t kSlotHalves = 128 >> 4, kRowGroups = 256 >> 4;
  return uint64_t((address >> 4) & 0x3FFF) | kSlotHalves << 16 | kRowGroups << 32;
}

// d += a * b: one m64n128k16 step, a from registers, b by descriptor (not transposed).
// (Hopper's own instructions exist only in the sm_90a code; the portable compute_90 PTX traps.)
__device__ inline void wgmma_step(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint64_t b) {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b));
#else
  __trap();
#endif
}

#ifdef __CUDA_ARCH_FEAT_SM90_ALL
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ inline void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory"); }
#else
__device__ inline void wgmma_fence() {}
__device__ inline void wgmma_commit() {}
template <int kPending>
__device__ inline void wgmma_wait() {}
#endif
// Makes the compiler hold v's registers as they are up to here (the A fragments of steps that
// may still be running: wgmma reads them after it is issued).
__device__ inline void keep(uint4& v) { asm volatile("" : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)); }

// Shared memory written by the copies, read next by the tensor cores (the async proxy).
__device__ inline void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// kOverlap (LOCKSTEP_CUDA_WGMMA_OVERLAP=1, an experiment not yet run on a GPU): a block's steps
// run on while the next block's copies land and its fragments load (wgmma.wait_group 1), and
// the stage they read is refilled a block later; only a run's end waits for all of its steps.
template <bool kPacked, bool kOverlap>
__global__ void __launch_bounds__(kThreads, 1)
    matmul_bf16_wgmma_kernel(const __nv_bfloat16* __restrict__ x_hi, const __nv_bfloat16* __restrict__ x_lo,
                             const __nv_bfloat16* __restrict__ w, float* __restrict__ out, int64_t k, int64_t m,
                             MatmulRows rows) {
  constexpr int kRing = kStages<kOverlap>;
  constexpr int kAhead = kOverlap ? kRing - 2 : kRing - 1;  // blocks copied before the first step
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

  for (int64_t tile_row = mine.first; tile_row < mine.last; tile_row += kRows) {
    const int tile_rows = int(min64(kRows, mine.last - tile_row));
    // Each thread copies two 16-byte pieces of the weight tile and two of each x tile.
    auto stage_block = [&](int b, Stage& st) {
      if (b < runs.blocks) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int piece = threadIdx.x + i * kThreads, row = piece / 4, part = piece % 4;
          const int64_t col = col0 + row, at = int64_t(b) * kBlockK + part * 8;
          const bool valid = col < m && at < k;
          copy16(&st.w[row][part * 8], mine.w + (valid ? weight_at<kPacked>(col, at, k) : 0), valid);
          // x: piece `part` of the row's 32 slots is step half part / 2, slot half part % 2.
          const bool in = row < tile_rows;
          const int64_t entry = tile_row + (in ? row : 0);
          const int64_t x_row = rows.in_rows ? rows.in_rows[entry] : entry;
          const size_t offset = size_t(x_row * kpad + int64_t(b) * kBlockK + part * 8);
          copy16(&st.hi[part / 2][row / 8][part % 2][row % 8][0], x_hi + (in ? offset : 0), in);
          copy16(&st.lo[part / 2][row / 8][part % 2][row % 8][0], x_lo + (in ? offset : 0), in);
        }
      }
      commit_copies();
    };
    __syncthreads();  // the previous tile's stages are read
#pragma unroll
    for (int s = 0; s < kAhead; ++s) stage_block(s, stages[s]);

    float acc[64], total[64];
    // A block's four steps on acc, committed as one group: the weights from the stage into this
    // warp's A fragments f (columns g and g + 8), x's hi and lo by descriptor.
    auto steps = [&](const Stage& st, uint4 (&f)[2]) {
      f[0] = *reinterpret_cast<const uint4*>(&st.w[warp_col + g][8 * t]);
      f[1] = *reinterpret_cast<const uint4*>(&st.w[warp_col + g + 8][8 * t]);
      wgmma_fence();
      wgmma_step(acc, f[0].x, f[1].x, f[0].y, f[1].y, core_matrices(&st.hi[0]));
      wgmma_step(acc, f[0].x, f[1].x, f[0].y, f[1].y, core_matrices(&st.lo[0]));
      wgmma_step(acc, f[0].z, f[1].z, f[0].w, f[1].w, core_matrices(&st.hi[1]));
      wgmma_step(acc, f[0].z, f[1].z, f[0].w, f[1].w, core_matrices(&st.lo[1]));
      wgmma_commit();
    };
    if constexpr (!kOverlap) {
      for (int b = 0; b < runs.blocks; ++b) {
        wait_copies<kAhead - 1>();
        fence_async_shared();
        __syncthreads();  // block b is in; the stage block b - 1 used is free (its steps waited on)
        stage_block(b + kAhead, stages[(b + kAhead) % kRing]);
        if (b % runs.per_run == 0) {
#pragma unroll
          for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
        }
        uint4 f[2];
        steps(stages[b % kRing], f);
        wgmma_wait<0>();
        if (b % runs.per_run == runs.per_run - 1 || b == runs.blocks - 1) {
#pragma unroll
          for (int i = 0; i < 64; ++i) total[i] = b < runs.per_run ? acc[i] : total[i] + acc[i];
        }
      }
    } else {
      // Runs outside, blocks inside: between a run's steps nothing but the steps touches acc, so
      // they run on past the loop's turn (given a conditional zeroing, ptxas waits for them).
      // Block b's A fragments go to set b % 2: block b - 1's steps still read the other set,
      // which `keep` holds until wgmma_wait<1> says they are done.
      uint4 sets[2][2];
      auto block = [&](int b, uint4 (&f)[2], uint4 (&running)[2]) {
        wait_copies<kAhead - 1>();
        fence_async_shared();
        __syncthreads();  // block b is in; block b - 2's stage is free (its steps waited on below)
        stage_block(b + kAhead, stages[(b + kAhead) % kRing]);
        steps(stages[b % kRing], f);
        wgmma_wait<1>();  // block b - 1's steps are done
        keep(running[0]), keep(running[1]);
      };
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
    wait_copies<0>();
    // total[4c + e]: weight column warp_col + g (+ 8 for e >= 2), x row 8c + 2t + e % 2.
#pragma unroll
    for (int c = 0; c < kRows / 8; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t col = col0 + warp_col + g + (e >= 2 ? 8 : 0);
        const int row = 8 * c + 2 * t + e % 2;
        if (col >= m || row >= tile_rows) continue;
        const int64_t entry = tile_row + row;
        store(rows, out, m, rows.out_rows ? rows.out_rows[entry] : entry, col, total[4 * c + e]);
      }
    }
  }
}

template <bool kOverlap>
void launch_kernel(const __nv_bfloat16* hi, const __nv_bfloat16* lo, const __nv_bfloat16* w, float* out, int64_t k,
                   int64_t m, const MatmulRows& rows, Launches& launches) {
  const dim3 grid(blocks_for(m, kCols), rows.segments ? unsigned(rows.groups) : blocks_for(rows.n, kRows));
  launch(rows.packed ? matmul_bf16_wgmma_kernel<true, kOverlap> : matmul_bf16_wgmma_kernel<false, kOverlap>, grid,
         kThreads, kSharedBytes<kOverlap>, launches, hi, lo, w, out, k, m, rows);
}

bool overlap_on() {
  static const bool on = [] {
    const char* value = std::getenv("LOCKSTEP_CUDA_WGMMA_OVERLAP");
    return value && std::string(value) == "1";
  }();
  return on;
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
  auto allow = [](auto overlap) {
    constexpr bool kOverlap = decltype(overlap)::value;
    for (auto kernel : {matmul_bf16_wgmma_kernel<false, kOverlap>, matmul_bf16_wgmma_kernel<true, kOverlap>})
      LOCKSTEP_CUDA(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSharedBytes<kOverlap>)));
  };
  allow(std::false_type{});
  allow(std::true_type{});
}

void launch_matmul_bf16_wgmma(const __nv_bfloat16* hi, const __nv_bfloat16* lo, const __nv_bfloat16* w, float* out,
                              int64_t k, int64_t m, const MatmulRows& rows, Launches& launches) {
  if (overlap_on()) return launch_kernel<true>(hi, lo, w, out, k, m, rows, launches);
  launch_kernel<false>(hi, lo, w, out, k, m, rows, launches);
}

}  // namespace lockstep::cuda::bf16
