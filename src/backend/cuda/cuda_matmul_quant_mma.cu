// The quantized matmul on the tensor cores, for every launch of the formats whose codes are
// small integers or FP8 values (MLX affine 4 and 8 bits, Q8_0, Q4_0, FP8): a row's sums are
// fixed by k alone, whatever the launch's rows, so every launch of such a weight takes this
// kernel and a row keeps its bits in a round of any width and in a fill.
//
// The arithmetic. A code is exact in bf16 (an integer of at most 8 bits, centred on zero, or an
// e4m3 value), so the mma multiplies the codes themselves; x is split into bf16 hi and lo
// (as bf16::split does), as for bf16 weights. For each group of values that share a scale (and a bias):
//   gsum = sum of code * x over the group      (mma steps of 16 values, in order, hi then lo)
//   xsum = sum of x over the group             (affine only: the same steps with codes of 1)
//   acc  = fma(scale, gsum, acc), then acc = fma(bias', xsum, acc)
// where bias' = bias + offset * scale for the offset the codes are centred by (8 or 128), so
// the two terms do not cancel. k is cut into runs of whole groups (mma_runs: by k and the group
// alone), each run summed by one warp, and the runs' sums added in run order. Not the f32
// matmul of the dequantized values bit for bit (the CPU's contract): within a tolerance of it,
// and the same bits for a row at every width (QuantMatmul's tests).
//
// The layout in an mma step: a k block of 32 values is four lanes' eight consecutive values
// (lane t of a quad: 8t .. 8t + 7); lane t's eight go into the fragments as four bf16 pairs,
// (0, 2) (1, 3) for the block's first step and (4, 6) (5, 7) for its second. The weights and x
// take the same permutation, so every product pairs a code with its own x.
#include <cuda_fp8.h>

#include <type_traits>

#include "backend/cuda/cuda_matmul_bf16.cuh"
#include "backend/cuda/cuda_quant.cuh"

namespace lockstep::cuda {

namespace {

using bf16::kMaxRuns;  // runs of k a block, one warp each
constexpr int kColTiles = 2;                 // 16-column mma tiles a warp
constexpr int kBlockCols = 16 * kColTiles;   // a block's columns
constexpr int64_t kPlainRows = 64;           // rows a block of a plain launch takes
constexpr uint32_t kMagic = 0x43434343u;     // bf16 0x43xx is 128 + xx for xx < 128
constexpr uint32_t kOnes = 0x3F803F80u;      // bf16 pair (1, 1)

// k cut into runs of whole groups: at most kMaxRuns, at least 128 values each.
struct MmaRuns {
  int groups, per_run, count;
};

__host__ __device__ inline MmaRuns mma_runs(int64_t k, int group) {
  const int groups = int(k / group);
  int per_run = (groups + kMaxRuns - 1) / kMaxRuns;
  const int least = (128 + group - 1) / group;
  if (per_run < least) per_run = least;
  return {groups, per_run, (groups + per_run - 1) / per_run};
}

__device__ inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector) { return __byte_perm(a, b, selector); }

// bf16 pair minus `v` from both halves (exact for the small integers it is used on).
__device__ inline uint32_t minus(uint32_t pair, float v) {
  const __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&pair), __float2bfloat162_rn(v));
  return *reinterpret_cast<const uint32_t*>(&r);
}

__device__ inline uint32_t pack(float lo_half, float hi_half) {
  const __nv_bfloat162 r = __floats2bfloat162_rn(lo_half, hi_half);
  return *reinterpret_cast<const uint32_t*>(&r);
}

// Bytes [c0, c1, c2, c3] of `lo` and [c4 .. c7] of `hi`, bytes below 128 each, as the four
// pairs of (128 + c) minus `offset`: (0, 2) (1, 3) (4, 6) (5, 7).
__device__ inline void pairs_of_small_bytes(uint32_t lo, uint32_t hi, float offset, uint32_t (&q)[4]) {
  q[0] = minus(prmt(lo, kMagic, 0x4240), offset);
  q[1] = minus(prmt(lo, kMagic, 0x4341), offset);
  q[2] = minus(prmt(hi, kMagic, 0x4240), offset);
  q[3] = minus(prmt(hi, kMagic, 0x4341), offset);
}

// Bytes [c0 .. c3] of `lo` and [c4 .. c7] of `hi` (any bytes) as the pairs of c - 128.
__device__ inline void pairs_of_bytes(uint32_t lo, uint32_t hi, uint32_t (&q)[4]) {
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = small_int_of_byte<128>(i < 4 ? lo : hi, i % 4);
  q[0] = pack(v[0], v[2]), q[1] = pack(v[1], v[3]), q[2] = pack(v[4], v[6]), q[3] = pack(v[5], v[7]);
}

// Two e4m3 codes (bits 0-7 and 8-15 of `two`) as a bf16 pair of their values (exact: through f16).
__device__ inline uint32_t pair_of_e4m3(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two & 0xffffu), __NV_E4M3);
  const __half2 v = *reinterpret_cast<const __half2*>(&h);
  return pack(__low2float(v), __high2float(v));
}

// A 4-byte word of weights: through the read-only cache from global memory, or a plain load
// where the block staged its rows in shared memory.
template <bool kStaged>
__device__ inline uint32_t weight_word(const uint32_t* p) {
  if constexpr (kStaged)
    return *p;
  else
    return __ldg(p);
}

// Per format: how many values share a scale (0: the view's group), whether a bias term
// follows, the four code pairs of lane t's eight values in k block `block` of a row, and a
// group's scale and bias' (bias + offset * scale).
template <QuantKind kKind>
struct MmaCodes {
  static constexpr bool kBias = kKind == QuantKind::affine4 || kKind == QuantKind::affine8;

  template <bool kStaged>
  __device__ static void pairs(const uint8_t* row, int block, int t, uint32_t (&q)[4]) {
    if constexpr (kKind == QuantKind::affine4) {
      const uint32_t word = weight_word<kStaged>(reinterpret_cast<const uint32_t*>(row) + block * 4 + t);
      const uint32_t even = word & 0x0F0F0F0Fu, odd = (word >> 4) & 0x0F0F0F0Fu;  // codes 0 2 4 6, 1 3 5 7
      q[0] = minus(prmt(even, kMagic, 0x4140), 136.0f);
      q[1] = minus(prmt(odd, kMagic, 0x4140), 136.0f);
      q[2] = minus(prmt(even, kMagic, 0x4342), 136.0f);
      q[3] = minus(prmt(odd, kMagic, 0x4342), 136.0f);
    } else if constexpr (kKind == QuantKind::affine8) {
      const uint32_t* words = reinterpret_cast<const uint32_t*>(row) + block * 8 + 2 * t;
      pairs_of_bytes(weight_word<kStaged>(words), weight_word<kStaged>(words + 1), q);
    } else if constexpr (kKind == QuantKind::fp8) {
      const uint32_t* words = reinterpret_cast<const uint32_t*>(row) + block * 8 + 2 * t;
      const uint32_t lo = weight_word<kStaged>(words), hi = weight_word<kStaged>(words + 1);
      const uint32_t even = prmt(lo, hi, 0x6420), odd = prmt(lo, hi, 0x7531);
      q[0] = pair_of_e4m3(even), q[1] = pair_of_e4m3(odd);
      q[2] = pair_of_e4m3(even >> 16), q[3] = pair_of_e4m3(odd >> 16);
    } else if constexpr (kKind == QuantKind::q8_0) {
      uint32_t words[2];
      load_words2(row + size_t(block) * 34 + 2 + 8 * t, words);
      pairs_of_bytes(words[0] ^ 0x80808080u, words[1] ^ 0x80808080u, q);  // int8 + 128
    } else {  // q4_0: values 0-15 in the low nibbles of the block's 16 bytes, 16-31 in the high
      uint32_t words[2];
      load_words2(row + size_t(block) * 18 + 2 + 8 * (t % 2), words);
      const int shift = 4 * (t / 2);
      pairs_of_small_bytes((words[0] >> shift) & 0x0F0F0F0Fu, (words[1] >> shift) & 0x0F0F0F0Fu, 136.0f, q);
    }
  }

  __device__ static float scale(const QuantWeights<kKind>& w, const uint8_t* row, int group) {
    if constexpr (kKind == QuantKind::q8_0) return f16_at(row + size_t(group) * 34);
    if constexpr (kKind == QuantKind::q4_0) return f16_at(row + size_t(group) * 18);
    if constexpr (kKind == QuantKind::fp8) return f32_at(row + w.values_bytes + size_t(group) * 4);
    return w.scale_at(row + w.values_bytes + size_t(group) * (w.scale_type == DType::f32 ? 4 : 2));
  }

  __device__ static float bias(const QuantWeights<kKind>& w, const uint8_t* row, int group, float scale) {
    constexpr float kOffset = kKind == QuantKind::affine4 ? 8.0f : 128.0f;  // the codes' centre
    const size_t size = w.scale_type == DType::f32 ? 4 : 2;
    return __fmaf_rn(kOffset, scale, w.scale_at(row + w.values_bytes + w.scales_bytes + size_t(group) * size));
  }
};

// Lane t's eight x values of k block `block` (zeros where the lane has no row), split into hi
// and lo pairs in the codes' order.
__device__ inline void x_pairs(const float* row, bool has, int block, int t, uint32_t (&hi)[4], uint32_t (&lo)[4]) {
  float v[8] = {};
  if (has) {
    const float4* p = reinterpret_cast<const float4*>(row + block * 32 + 8 * t);
    const float4 a = __ldg(p), b = __ldg(p + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
  float h[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) h[i] = __bfloat162float(__float2bfloat16_rn(v[i]));
  constexpr int kPair[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const int a = kPair[p][0], b = kPair[p][1];
    hi[p] = pack(h[a], h[b]);
    lo[p] = pack(v[a] - h[a], v[b] - h[b]);
  }
}

__device__ inline void prefetch_l2(const uint8_t* begin, const uint8_t* end) {
  for (const uint8_t* p = begin - reinterpret_cast<uintptr_t>(begin) % 128; p < end; p += 128)
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

// Asks L2 for a plain launch's weights of this warp's run (groups [g_begin, g_end) of the
// block's columns) before the kernel waits for the one ahead: they hang on no kernel's output.
// Lane l takes column l of the block: its run's codes (or blocks), then its scales and biases.
template <QuantKind kKind, int kGroupValues>
__device__ inline void prefetch_run(const QuantWeights<kKind>& w, unsigned col_block, int64_t m, int64_t k,
                                    int g_begin, int g_end, int lane) {
  const uint8_t* row = w.row(0, 0, min64(int64_t(col_block) * kBlockCols + lane, m - 1), k);
  if constexpr (kKind == QuantKind::q8_0 || kKind == QuantKind::q4_0) {
    constexpr int kBytes = kKind == QuantKind::q8_0 ? 34 : 18;
    prefetch_l2(row + g_begin * kBytes, row + g_end * kBytes);
  } else {
    constexpr int kBits = kKind == QuantKind::affine4 ? 4 : 8;
    prefetch_l2(row + g_begin * (kGroupValues * kBits / 8), row + g_end * (kGroupValues * kBits / 8));
    const size_t size = kKind == QuantKind::fp8 || w.scale_type == DType::f32 ? 4 : 2;
    const uint8_t* scales = row + w.values_bytes;
    prefetch_l2(scales + g_begin * size, scales + g_end * size);
    if constexpr (kKind != QuantKind::fp8) prefetch_l2(scales + w.scales_bytes + g_begin * size, scales + w.scales_bytes + g_end * size);
  }
}

// Copies `bytes` from `src` (4-byte aligned, as are `bytes`) into shared memory at `dst` + src % 16,
// where `dst` is 16-byte aligned, so source and copy share their offset within 16 bytes: 16-byte
// copies for the aligned middle, 4-byte ones for the ends. Returns where the copy starts.
__device__ inline uint8_t* stage_bytes(uint8_t* dst, const uint8_t* src, size_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(src), end = begin + bytes;
  uint8_t* copy = dst + begin % 16;
  const uintptr_t body_begin = (begin + 15) & ~uintptr_t(15), body_end = end & ~uintptr_t(15);
  auto copy4 = [&](uintptr_t at) {
    const unsigned address = unsigned(__cvta_generic_to_shared(copy + (at - begin)));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(address), "l"(at) : "memory");
  };
  if (body_begin >= body_end) {  // under 32 bytes: no aligned middle to speak of
    for (uintptr_t at = begin + 4 * threadIdx.x; at < end; at += 4 * blockDim.x) copy4(at);
  } else {
    if (begin + 4 * threadIdx.x < body_begin) copy4(begin + 4 * threadIdx.x);
    if (body_end + 4 * threadIdx.x < end) copy4(body_end + 4 * threadIdx.x);
    for (uintptr_t at = body_begin + 16 * threadIdx.x; at < body_end; at += 16 * blockDim.x)
      bf16::copy16(copy + (at - begin), reinterpret_cast<const void*>(at), true);
  }
  bf16::commit_copies();
  return copy;
}

// Bytes from one staged row to the next. The lanes of a quad read 16 consecutive bytes of each of
// 8 rows at once: rows a multiple of 128 bytes apart would all fall in the same shared-memory
// banks (8-way conflicts; affine 4-bit at k = 4096 has rows of 2,304 bytes), so rows of whole
// 16 bytes are spaced 16 bytes past a multiple of 128, which gives the 8 rows 32 distinct banks.
// Others stay contiguous (their rows start at other offsets within 16 bytes, and cp.async keeps a
// copy's offset): at most 2-way conflicts.
__host__ __device__ inline size_t staged_stride(size_t row_bytes) {
  if (row_bytes % 16 != 0) return row_bytes;
  return row_bytes + (144 - row_bytes % 128) % 128;
}

// A block: kBlockCols columns from blockIdx.x * kBlockCols, one warp a run of k; the rows of
// its group (grouped launches) or kPlainRows rows from blockIdx.y * kPlainRows (plain), taken
// kTiles * 8 at a time. kGroupBlocks: k blocks of 32 a group.
// kStaged (launches of a few rows, whose weights are most of what they read): the block first
// copies its columns' whole rows (one contiguous run of bytes) into shared memory with cp.async,
// all in flight at once, where the unstaged kernel's warps wait on each group's loads in turn;
// then the same steps read them from there: the same sums.
template <QuantKind kKind, int kTiles, int kGroupBlocks, bool kStaged>
__global__ void __launch_bounds__(kMaxRuns * 32)
    matmul_quant_mma_kernel(const float* __restrict__ x, const QuantWeights<kKind> w, float* __restrict__ out,
                            int64_t k, int64_t m, MatmulRows rows) {
  using Codes = MmaCodes<kKind>;
  constexpr int kTileRows = 8 * kTiles;
  __shared__ float partial[kMaxRuns][kBlockCols][kTileRows];
  extern __shared__ __align__(16) uint8_t staged[];  // kStaged: the block's rows
  allow_early_launch();
  const MmaRuns runs = mma_runs(k, 32 * kGroupBlocks);
  const int run = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int g_begin = run * runs.per_run, g_end = min(runs.groups, g_begin + runs.per_run);
  const int64_t col0 = int64_t(blockIdx.x) * kBlockCols;
  const int64_t cols = min64(kBlockCols, m - col0);
  const uint8_t* copy = nullptr;  // kStaged: where the block's first row starts in shared memory
  const size_t stride = staged_stride(w.row_bytes);
  // The block's rows from `first_row` on into shared memory, `stride` apart.
  const auto stage = [&](const uint8_t* first_row) {
    if (stride == w.row_bytes) return stage_bytes(staged, first_row, size_t(cols) * w.row_bytes);
    for (int64_t r = 0; r < cols; ++r) stage_bytes(staged + r * stride, first_row + r * w.row_bytes, w.row_bytes);
    return staged + reinterpret_cast<uintptr_t>(first_row) % 16;  // every row's offset (rows of whole 16 bytes)
  };
  // A plain launch's weights hang on no kernel's output: ask for them before the wait.
  if (!rows.segments) {
    if constexpr (kStaged)
      copy = stage(w.row(0, 0, col0, k));
    else
      prefetch_run<kKind, 32 * kGroupBlocks>(w, blockIdx.x, m, k, g_begin, g_end, lane);
  }
  wait_for_inputs();
  int64_t first = 0, last = 0, matrix = 0;
  if (!rows.segments) {
    first = int64_t(blockIdx.y) * kPlainRows;
    last = min64(rows.n, first + kPlainRows);
  } else {
    matrix = launched_group(rows);
    if (matrix < 0) return;  // the whole block leaves together
    first = rows.segments[matrix], last = rows.segments[matrix + 1];
  }
  if (first >= last) {
    if constexpr (kStaged) bf16::wait_copies<0>();
    return;
  }
  if constexpr (kStaged) {
    if (rows.segments) copy = stage(w.row(matrix, rows.group_stride, col0, k));
    bf16::wait_copies<0>();
    __syncthreads();
  }
  // This lane's weight rows: tile c's columns g and g + 8 (the last column for those past m).
  const uint8_t* w_rows[kColTiles][2];
#pragma unroll
  for (int c = 0; c < kColTiles; ++c)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t col = min64(col0 + 16 * c + g + 8 * h, m - 1);
      w_rows[c][h] = kStaged ? copy + size_t(col - col0) * stride : w.row(matrix, rows.group_stride, col, k);
    }

  for (int64_t tile = first; tile < last; tile += kTileRows) {
    const int tile_rows = int(min64(kTileRows, last - tile));
    const float* x_rows[kTiles];
    bool has[kTiles];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      has[j] = 8 * j + g < tile_rows;
      const int64_t entry = tile + (has[j] ? 8 * j + g : 0);
      x_rows[j] = x + (rows.in_rows ? rows.in_rows[entry] : entry) * k;
    }
    float acc[kColTiles][kTiles][4] = {};
    for (int group = g_begin; group < g_end; ++group) {
      float gsum[kColTiles][kTiles][4] = {};
      float xsum[kTiles][4] = {};
#pragma unroll
      for (int i = 0; i < kGroupBlocks; ++i) {
        const int block = group * kGroupBlocks + i;
        uint32_t q[kColTiles][2][4];
#pragma unroll
        for (int c = 0; c < kColTiles; ++c)
#pragma unroll
          for (int h = 0; h < 2; ++h) Codes::template pairs<kStaged>(w_rows[c][h], block, t, q[c][h]);
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
          uint32_t hi[4], lo[4];
          x_pairs(x_rows[j], has[j], block, t, hi, lo);
#pragma unroll
          for (int s = 0; s < 2; ++s) {
#pragma unroll
            for (int c = 0; c < kColTiles; ++c) {
              const uint32_t(&a)[2][4] = q[c];
              bf16::mma(gsum[c][j], a[0][2 * s], a[1][2 * s], a[0][2 * s + 1], a[1][2 * s + 1], hi[2 * s], hi[2 * s + 1]);
              bf16::mma(gsum[c][j], a[0][2 * s], a[1][2 * s], a[0][2 * s + 1], a[1][2 * s + 1], lo[2 * s], lo[2 * s + 1]);
            }
            if constexpr (Codes::kBias) {
              bf16::mma(xsum[j], kOnes, kOnes, kOnes, kOnes, hi[2 * s], hi[2 * s + 1]);
              bf16::mma(xsum[j], kOnes, kOnes, kOnes, kOnes, lo[2 * s], lo[2 * s + 1]);
            }
          }
        }
      }
      // The group's fold: acc[c][j][2h + e] is column g + 8h of tile c, row 2t + e of tile j.
#pragma unroll
      for (int c = 0; c < kColTiles; ++c)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float scale = Codes::scale(w, w_rows[c][h], group);
          float bias = 0.0f;
          if constexpr (Codes::kBias) bias = Codes::bias(w, w_rows[c][h], group, scale);
#pragma unroll
          for (int j = 0; j < kTiles; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float& a = acc[c][j][2 * h + e];
              a = __fmaf_rn(scale, gsum[c][j][2 * h + e], a);
              if constexpr (Codes::kBias) a = __fmaf_rn(bias, xsum[j][e], a);
            }
        }
    }
#pragma unroll
    for (int c = 0; c < kColTiles; ++c)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < kTiles; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) partial[run][16 * c + g + 8 * h][8 * j + 2 * t + e] = acc[c][j][2 * h + e];
    __syncthreads();
    // The runs' sums in run order, stored by the block's threads in turn (as the bf16 kernels do).
    bf16::store_row_group(rows, out, m, col0, kBlockCols, tile, tile_rows, runs.count,
                          [&](int s, int c, int r) { return partial[s][c][r]; });
    __syncthreads();
  }
}

// The most shared memory a staged block takes (its rows, spaced, plus 16 bytes for their offset): two
// blocks an SM with the partials.
constexpr size_t kStagedMaxBytes = 100 * 1024;

size_t staged_bytes(const QuantView& view) { return kBlockCols * staged_stride(view.row_bytes) + 16; }

// LOCKSTEP_CUDA_QUANT_STAGED=1 (an experiment until measured): launches of up to 8 rows a
// weight (or a group) stage their blocks' rows in shared memory, where their rows fit.
bool staged_on() {
  static const bool on = switched_on("LOCKSTEP_CUDA_QUANT_STAGED");
  return on;
}

template <QuantKind kKind, int kTiles, int kGroupBlocks, bool kStaged>
void launch_mma(const float* x, const QuantView& view, float* out, int64_t k, int64_t m, const MatmulRows& rows,
                Launches& launches) {
  QuantWeights<kKind> weights;
  static_cast<QuantView&>(weights) = view;
  const unsigned row_blocks = rows.segments ? unsigned(rows.groups) : blocks_for(rows.n, int(kPlainRows));
  const dim3 grid(blocks_for(m, kBlockCols), row_blocks);
  const int threads = 32 * mma_runs(k, 32 * kGroupBlocks).count;
  launch(matmul_quant_mma_kernel<kKind, kTiles, kGroupBlocks, kStaged>, grid, threads,
         kStaged ? staged_bytes(view) : 0, launches, x, weights, out, k, m, rows);
}

// The values a scale covers: 32 for the block formats, the view's group for the others.
int group_values(QuantKind kind, const QuantView& view) {
  return kind == QuantKind::q8_0 || kind == QuantKind::q4_0 ? 32 : 1 << view.group_shift;
}

template <QuantKind kKind>
void launch_kind(const float* x, const QuantView& view, float* out, int64_t k, int64_t m, const MatmulRows& rows,
                 Launches& launches) {
  const int64_t most_rows = rows.segments ? rows.max_group_rows : rows.n;
  const int group = group_values(kKind, view);
  const bool staged = staged_on() && view.row_bytes % 4 == 0 && reinterpret_cast<uintptr_t>(view.data) % 4 == 0 &&
                      staged_bytes(view) <= kStagedMaxBytes;
  auto with_tiles = [&](auto group_blocks) {
    constexpr int kGroupBlocks = decltype(group_blocks)::value;
    if (most_rows <= 8 && staged)
      launch_mma<kKind, 1, kGroupBlocks, true>(x, view, out, k, m, rows, launches);
    else if (most_rows <= 8)
      launch_mma<kKind, 1, kGroupBlocks, false>(x, view, out, k, m, rows, launches);
    else
      launch_mma<kKind, 2, kGroupBlocks, false>(x, view, out, k, m, rows, launches);
  };
  if (group == 32) return with_tiles(std::integral_constant<int, 1>{});
  if constexpr (kKind != QuantKind::q8_0 && kKind != QuantKind::q4_0) {
    if (group == 64) return with_tiles(std::integral_constant<int, 2>{});
    if (group == 128) return with_tiles(std::integral_constant<int, 4>{});
  }
  require(false, "matmul: a quantized group size the tensor-core kernel does not take");
}

}  // namespace

void prepare_matmul_quant_mma() {
  auto allow = [](auto kernel) {
    LOCKSTEP_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kStagedMaxBytes)));
  };
  for (QuantKind kind : {QuantKind::affine4, QuantKind::affine8, QuantKind::q8_0, QuantKind::q4_0, QuantKind::fp8})
    with_quant_kind(kind, [&](auto c) {
      constexpr QuantKind kKind = decltype(c)::value;
      if constexpr (kKind == QuantKind::affine4 || kKind == QuantKind::affine8 || kKind == QuantKind::fp8) {
        allow(matmul_quant_mma_kernel<kKind, 1, 1, true>);
        allow(matmul_quant_mma_kernel<kKind, 1, 2, true>);
        allow(matmul_quant_mma_kernel<kKind, 1, 4, true>);
      } else if constexpr (kKind == QuantKind::q8_0 || kKind == QuantKind::q4_0) {
        allow(matmul_quant_mma_kernel<kKind, 1, 1, true>);
      }
    });
}

bool quant_on_tensor_cores(QuantKind kind) {
  return kind == QuantKind::affine4 || kind == QuantKind::affine8 || kind == QuantKind::q8_0 ||
         kind == QuantKind::q4_0 || kind == QuantKind::fp8;
}

void launch_matmul_quant_mma(const float* x, QuantKind kind, const QuantView& view, float* out, int64_t k, int64_t m,
                             const MatmulRows& rows, Launches& launches) {
  require(quant_on_tensor_cores(kind) && k % 32 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0,
          "matmul: a quantized launch the tensor-core kernel does not take");
  switch (kind) {
    case QuantKind::affine4: return launch_kind<QuantKind::affine4>(x, view, out, k, m, rows, launches);
    case QuantKind::affine8: return launch_kind<QuantKind::affine8>(x, view, out, k, m, rows, launches);
    case QuantKind::q8_0: return launch_kind<QuantKind::q8_0>(x, view, out, k, m, rows, launches);
    case QuantKind::q4_0: return launch_kind<QuantKind::q4_0>(x, view, out, k, m, rows, launches);
    case QuantKind::fp8: return launch_kind<QuantKind::fp8>(x, view, out, k, m, rows, launches);
    default: break;
  }
}

}  // namespace lockstep::cuda
