// CUDA paged attention on the tensor cores (mma.sync m16n8k16, bf16 in, f32 sums), for models
// whose KV heads each serve at most 16 query heads. A warp computes one (row, KV head): the
// KV head's query heads are the mma's 16 rows (zeros past them), so each key and value the
// warp reads serves every head at once. Rounds, fills and verify rows all run this kernel, and
// a tensor core computes each output from its own row and column alone, so a (row, head) gets
// the same bits whatever else shares the launch.
//
// A row's positions 0..pos are read in splits of kSplit; for each split, in order:
//   scores: q . k with q = qh + ql and k = kh + kl (bf16 halves, about 16 significant bits):
//           the products ql.kh, qh.kl, qh.kh, in that order, over the head dimension in blocks
//           of 16 (a lane's four values of a block are four consecutive dimensions), then
//           times the scale; positions past the row's own are -inf;
//   weights: per head the split's max, exp(score - max), and their sum: a lane adds its 16
//           positions in order, then the four lanes of a quad are added by a fixed butterfly;
//   values: weights times values, both split the same way (the same three products), with
//           the split's positions in blocks of 16, in order; positions past the row's are
//           read as zeros;
//   fold: the split joins the running (max, sum, columns) as in cuda_attention.cuh.
// A round of few rows on long contexts gives each split a warp of its own and folds the
// results in a second kernel with the same fold, so it keeps the bits of the one-warp walk.
// (The scalar kernel in cuda_attention.cu serves other shapes; it computes in f32 fmaf chains,
// so the two do not give the same bits, and a model only ever runs one of them.)
#include "backend/cuda/cuda_attention.cuh"
#include "backend/cuda/cuda_matmul_bf16.cuh"

namespace lockstep {
namespace {

using cuda::attention_parts::fold;
using cuda::attention_parts::Fold;
using cuda::attention_parts::fold_column;
using cuda::bf16::mma;

constexpr int kSplit = 64;
constexpr int kTiles = kSplit / 8;  // score tiles of 8 positions a split
// Split-parallel for launches of at most this many (row, KV head) pairs, keeping at most
// kMaxSplitResults split results (16 heads of 128: 8.3 KB each, 136 MB).
constexpr int64_t kSplitParallelPairs = 256;
constexpr int64_t kMaxSplitResults = 16384;
// Launches of at least this many pairs give each pair one warp (a block of its own, so that as
// many fit an SM as the registers allow); fewer, a block of kBlockWarps warps.
constexpr int64_t kWarpWalkPairs = 1024;

// Two values as bf16 hi and lo halves, packed low element first (the mma's fragment order).
__device__ inline void split2(float x, float y, uint32_t& hi, uint32_t& lo) {
  __nv_bfloat16 xh, xl, yh, yl;
  cuda::bf16::split(x, xh, xl);
  cuda::bf16::split(y, yh, yl);
  hi = uint32_t(__bfloat16_as_ushort(xh)) | uint32_t(__bfloat16_as_ushort(yh)) << 16;
  lo = uint32_t(__bfloat16_as_ushort(xl)) | uint32_t(__bfloat16_as_ushort(yl)) << 16;
}

// An A fragment (16 x 16) as hi and lo halves.
struct Halves {
  uint32_t hi[4], lo[4];
};

// d += a * b over one block of 16, with a and b split: al.bh, then ah.bl, then ah.bh.
__device__ inline void mma3(float (&d)[4], const Halves& a, uint32_t bh0, uint32_t bh1, uint32_t bl0, uint32_t bl1) {
  mma(d, a.lo[0], a.lo[1], a.lo[2], a.lo[3], bh0, bh1);
  mma(d, a.hi[0], a.hi[1], a.hi[2], a.hi[3], bl0, bl1);
  mma(d, a.hi[0], a.hi[1], a.hi[2], a.hi[3], bh0, bh1);
}

__device__ inline float4 load4(const float* p) { return p ? *reinterpret_cast<const float4*>(p) : float4{0, 0, 0, 0}; }

// What one warp reads: its row's pages of one KV head.
struct Row {
  const int32_t* pages;
  const float *k_base, *v_base;
  int64_t length, page_stride;
  int page_shift, head_dim;
  // Where position pos's key (or value) starts, or null past the row's length.
  __device__ const float* at(const float* base, int64_t pos) const {
    if (pos >= length) return nullptr;
    const int64_t page_size = int64_t(1) << page_shift;
    return base + int64_t(pages[pos >> page_shift]) * page_stride + (pos & (page_size - 1)) * head_dim;
  }
};

// One split of kSplit positions from `first`: the split's max and sum for the lane's two heads
// (rows lane / 4 and lane / 4 + 8 of the mma), and the columns of weights times values in part:
// part[t][0..1] are head lane / 4, columns (2 * (lane % 4) + 0..1) * D / 8 + t; part[t][2..3]
// head lane / 4 + 8.
template <int D>
__device__ void attend_split(const Row& row, const float* q0, const float* q1, int64_t first, float scale,
                             float (&split_max)[2], float (&split_sum)[2], float (&part)[D / 8][4]) {
  const int lane = threadIdx.x % 32, quad = lane % 4, n = lane / 4;
  // Scores: tile t holds positions first + 8t .. + 7; the lane reads the key of position
  // first + 8t + n and holds the scores of positions first + 8t + 2 * quad + 0..1.
  float s[kTiles][4];
  const float* keys[kTiles];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    keys[t] = row.at(row.k_base, first + 8 * t + n);
    s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
  }
#pragma unroll 2
  for (int b = 0; b < D / 16; ++b) {
    const int d = 16 * b + 4 * quad;
    const float4 x = load4(q0 ? q0 + d : nullptr), y = load4(q1 ? q1 + d : nullptr);
    Halves a;
    split2(x.x, x.y, a.hi[0], a.lo[0]);
    split2(y.x, y.y, a.hi[1], a.lo[1]);
    split2(x.z, x.w, a.hi[2], a.lo[2]);
    split2(y.z, y.w, a.hi[3], a.lo[3]);
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const float4 k = load4(keys[t] ? keys[t] + d : nullptr);
      uint32_t bh0, bl0, bh1, bl1;
      split2(k.x, k.y, bh0, bl0);
      split2(k.z, k.w, bh1, bl1);
      mma3(s[t], a, bh0, bh1, bl0, bl1);
    }
  }
  // Weights: scale, mask, the split's max and exp(score - max) with their sum.
  float top[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const bool valid = first + 8 * t + 2 * quad + e % 2 < row.length;
      s[t][e] = valid ? __fmul_rn(s[t][e], scale) : -INFINITY;
      top[e / 2] = fmaxf(top[e / 2], s[t][e]);
    }
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    top[h] = fmaxf(top[h], __shfl_xor_sync(0xffffffffu, top[h], 1));
    top[h] = fmaxf(top[h], __shfl_xor_sync(0xffffffffu, top[h], 2));
  }
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[t][e] = expf(__fsub_rn(s[t][e], top[e / 2]));
      sum[e / 2] = __fadd_rn(sum[e / 2], s[t][e]);
    }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] = __fadd_rn(sum[h], __shfl_xor_sync(0xffffffffu, sum[h], 1));
    sum[h] = __fadd_rn(sum[h], __shfl_xor_sync(0xffffffffu, sum[h], 2));
    split_max[h] = top[h], split_sum[h] = sum[h];
  }
  // Values: block j of 16 positions is score tiles 2j and 2j + 1, so the lane's weights are
  // already its A fragment; it reads the values of positions first + 16j + 2 * quad + {0, 1,
  // 8, 9} at columns n * D / 8 + t, four at a time.
  constexpr int kCols = D / 8, kVec = kCols < 4 ? kCols : 4;
#pragma unroll
  for (int t = 0; t < kCols; ++t) part[t][0] = part[t][1] = part[t][2] = part[t][3] = 0.0f;
#pragma unroll
  for (int j = 0; j < kSplit / 16; ++j) {
    Halves a;
    split2(s[2 * j][0], s[2 * j][1], a.hi[0], a.lo[0]);
    split2(s[2 * j][2], s[2 * j][3], a.hi[1], a.lo[1]);
    split2(s[2 * j + 1][0], s[2 * j + 1][1], a.hi[2], a.lo[2]);
    split2(s[2 * j + 1][2], s[2 * j + 1][3], a.hi[3], a.lo[3]);
    const int64_t base = first + 16 * j + 2 * quad;
    const float* values[4] = {row.at(row.v_base, base), row.at(row.v_base, base + 1), row.at(row.v_base, base + 8),
                              row.at(row.v_base, base + 9)};
#pragma unroll
    for (int c = 0; c < kCols; c += kVec) {
      float v[4][kVec];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float* p = values[i] ? values[i] + n * kCols + c : nullptr;
        if constexpr (kVec == 4) {
          const float4 x = load4(p);
          v[i][0] = x.x, v[i][1] = x.y, v[i][2] = x.z, v[i][3] = x.w;
        } else {
          const float2 x = p ? *reinterpret_cast<const float2*>(p) : float2{0, 0};
          v[i][0] = x.x, v[i][1] = x.y;
        }
      }
#pragma unroll
      for (int u = 0; u < kVec; ++u) {
        uint32_t bh0, bl0, bh1, bl1;
        split2(v[0][u], v[1][u], bh0, bl0);
        split2(v[2][u], v[3][u], bh1, bl1);
        mma3(part[c + u], a, bh0, bh1, bl0, bl1);
      }
    }
  }
}

// How a launch shares out its (row, KV head) pairs: a warp walking a pair's splits in order
// (many pairs: fills and wide rounds), a block of kBlockWarps warps taking a pair's splits
// kBlockWarps at a time and folding them in order (fewer pairs, long rows), or a warp a split
// with the fold in a second kernel (few pairs). Every way folds the same splits in the same
// order with the same arithmetic, so a row's bits do not depend on which one its launch took.
enum class Walk { warp, block, split };

constexpr int kBlockWarps = 4;

// What a warp needs for its (row, KV head): the row's pages and its two query heads' rows.
struct Pair {
  Row row;
  const float *q0, *q1;
  int64_t splits;  // the row's splits
  float* out;      // the pair's first head's output row
};

template <int D>
__device__ Pair open_pair(int64_t pair, const float* q, const float* k_cache, const float* v_cache,
                          const int32_t* positions, const int32_t* row_seq, const int32_t* page_tables,
                          int64_t max_pages, int heads, int kv_heads, int page_shift, float* out) {
  const int64_t r = pair / kv_heads, g = pair % kv_heads, page_size = int64_t(1) << page_shift;
  const int per_kv = heads / kv_heads, n = threadIdx.x % 32 / 4;
  Pair p;
  p.row.length = int64_t(positions[r]) + 1;
  p.row.pages = page_tables + int64_t(row_seq[r]) * max_pages;
  p.row.page_shift = page_shift;
  p.row.head_dim = D;
  p.row.page_stride = int64_t(kv_heads) * page_size * D;
  p.row.k_base = k_cache + g * page_size * D;
  p.row.v_base = v_cache + g * page_size * D;
  p.splits = (p.row.length + kSplit - 1) / kSplit;
  const float* q_heads = q + (r * heads + g * per_kv) * D;
  p.q0 = n < per_kv ? q_heads + n * D : nullptr;
  p.q1 = n + 8 < per_kv ? q_heads + (n + 8) * D : nullptr;
  p.out = out + (r * heads + g * per_kv) * D;
  return p;
}

// Writes a split's result for the heads below per_kv as the fold kernel reads it: each head's
// max and sum, then each head's D columns (the split-parallel scratch and the block walk's
// shared memory alike).
template <int D>
__device__ void write_split(float* result, int per_kv, const float (&split_max)[2], const float (&split_sum)[2],
                            const float (&part)[D / 8][4]) {
  constexpr int kCols = D / 8;
  const int lane = threadIdx.x % 32, quad = lane % 4, n = lane / 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int head = n + 8 * h;
    if (head >= per_kv) continue;
    if (quad == 0) result[2 * head] = split_max[h], result[2 * head + 1] = split_sum[h];
    float* columns = result + 2 * per_kv + head * D;
#pragma unroll
    for (int t = 0; t < kCols; ++t)
#pragma unroll
      for (int e = 0; e < 2; ++e) columns[(2 * quad + e) * kCols + t] = part[t][2 * h + e];
  }
}

// Walk::warp and Walk::split: a warp a block, item blockIdx.x (a pair, or a (pair, split) with
// its result at splits + item * per_kv * (D + 2), see write_split). Walk::block: kBlockWarps
// warps, pair blockIdx.x.
template <int D, Walk walk>
__global__ void __launch_bounds__(kBlockWarps * 32)
    attention_mma_kernel(const float* __restrict__ q, const float* __restrict__ k_cache,
                         const float* __restrict__ v_cache, const int32_t* positions, const int32_t* row_seq,
                         const int32_t* page_tables, int64_t max_pages, int heads, int kv_heads, int page_shift,
                         float scale, int64_t max_splits, float* __restrict__ splits,
                         float* __restrict__ out) {
  cuda::start_kernel();
  constexpr int kCols = D / 8;
  extern __shared__ float shared[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, quad = lane % 4, n = lane / 4;
  const int per_kv = heads / kv_heads;
  const int64_t item = blockIdx.x;
  const Pair p = open_pair<D>(walk == Walk::split ? item / max_splits : item, q, k_cache, v_cache, positions, row_seq,
                              page_tables, max_pages, heads, kv_heads, page_shift, out);
  float part[kCols][4], split_max[2], split_sum[2];
  if constexpr (walk == Walk::split) {
    const int64_t split = item % max_splits;
    if (split >= p.splits) return;
    attend_split<D>(p.row, p.q0, p.q1, split * kSplit, scale, split_max, split_sum, part);
    write_split<D>(splits + item * per_kv * (D + 2), per_kv, split_max, split_sum, part);
    return;
  }
  if constexpr (walk == Walk::warp) {
    // The running columns in shared memory, a lane's own in its own bank: total[i][lane].
    float(*total)[32] = reinterpret_cast<float(*)[32]>(shared);
    float total_max[2] = {-INFINITY, -INFINITY}, total_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 4 * kCols; ++i) total[i][lane] = 0.0f;
    for (int64_t split = 0; split < p.splits; ++split) {
      attend_split<D>(p.row, p.q0, p.q1, split * kSplit, scale, split_max, split_sum, part);
      const Fold f[2] = {fold(total_max[0], total_sum[0], split_max[0], split_sum[0]),
                         fold(total_max[1], total_sum[1], split_max[1], split_sum[1])};
#pragma unroll
      for (int t = 0; t < kCols; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) total[4 * t + e][lane] = fold_column(total[4 * t + e][lane], part[t][e], f[e / 2]);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (n + 8 * h >= per_kv) continue;
      float* out_head = p.out + (n + 8 * h) * D;
#pragma unroll
      for (int t = 0; t < kCols; ++t)
#pragma unroll
        for (int e = 0; e < 2; ++e) out_head[(2 * quad + e) * kCols + t] = total[4 * t + 2 * h + e][lane] / total_sum[h];
    }
    return;
  }
  // Walk::block: warp w computes split group + w into results[w]; then thread h < per_kv folds
  // head h's max and sum through the group's splits in order, and every thread its columns
  // (head, column) = threadIdx.x + i * kBlockWarps * 32.
  constexpr int kPairs = 16 * D / (kBlockWarps * 32);
  float* results = shared;                                     // [kBlockWarps][16 * (D + 2)]
  float* folds = shared + kBlockWarps * 16 * (D + 2);          // [kBlockWarps][16][keep, add]
  float* sums = folds + kBlockWarps * 16 * 2;                  // [16]: the running sums, at the end
  float total[kPairs];
#pragma unroll
  for (int i = 0; i < kPairs; ++i) total[i] = 0.0f;
  float head_max = -INFINITY, head_sum = 0.0f;  // thread h's head h
  for (int64_t group = 0; group < p.splits; group += kBlockWarps) {
    const int count = int(cuda::min64(kBlockWarps, p.splits - group));
    if (warp < count) {
      attend_split<D>(p.row, p.q0, p.q1, (group + warp) * kSplit, scale, split_max, split_sum, part);
      write_split<D>(results + warp * 16 * (D + 2), per_kv, split_max, split_sum, part);
    }
    __syncthreads();
    if (threadIdx.x < per_kv)
      for (int w = 0; w < count; ++w) {
        const float* at = results + w * 16 * (D + 2);
        const Fold f = fold(head_max, head_sum, at[2 * threadIdx.x], at[2 * threadIdx.x + 1]);
        folds[(w * 16 + threadIdx.x) * 2] = f.keep, folds[(w * 16 + threadIdx.x) * 2 + 1] = f.add;
      }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const int pair = threadIdx.x + i * kBlockWarps * 32, head = pair / D, col = pair % D;
      if (head >= per_kv) continue;
      for (int w = 0; w < count; ++w) {
        const float* f = folds + (w * 16 + head) * 2;
        total[i] = fold_column(total[i], results[w * 16 * (D + 2) + 2 * per_kv + head * D + col], Fold{f[0], f[1]});
      }
    }
    __syncthreads();  // the results are read
  }
  if (threadIdx.x < per_kv) sums[threadIdx.x] = head_sum;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const int pair = threadIdx.x + i * kBlockWarps * 32, head = pair / D;
    if (head < per_kv) p.out[pair] = total[i] / sums[head];
  }
}

template <int D>
void launch_attention_mma(cuda::Context& context, const Tensor& q, const KvLayer& cache, const AttentionRows& rows,
                          float scale, const Tensor& out) {
  const int64_t n_rows = q.shape[0], heads = q.shape[1], kv_heads = cache.k.shape[1], page_size = cache.page_size();
  const int64_t pairs = n_rows * kv_heads, max_pages = rows.page_tables.cols();
  const int64_t max_splits = (max_pages * page_size + kSplit - 1) / kSplit;
  int page_shift = 0;
  while ((int64_t(1) << page_shift) < page_size) ++page_shift;
  cuda::require(int64_t(1) << page_shift == page_size, "attention: the KV page size is not a power of two");
  const Walk walk = pairs <= kSplitParallelPairs && max_splits > 1 && pairs * max_splits <= kMaxSplitResults ? Walk::split
                    : pairs < kWarpWalkPairs                                                          ? Walk::block
                                                                                                      : Walk::warp;
  float* splits = nullptr;
  if (walk == Walk::split)
    splits = static_cast<float*>(context.scratch.attention_splits.get(
        context.launches, size_t(pairs * max_splits * (heads / kv_heads) * (D + 2)) * sizeof(float)));
  const int64_t blocks = walk == Walk::split ? pairs * max_splits : pairs;
  const int threads = walk == Walk::block ? kBlockWarps * 32 : 32;
  const size_t shared = sizeof(float) * (walk == Walk::block ? size_t(kBlockWarps * 16 * (D + 4) + 16)
                                         : walk == Walk::warp ? size_t(4 * (D / 8) * 32)
                                                              : 0);
  const int32_t *positions = cuda::ptr<int32_t>(rows.positions), *row_seq = cuda::ptr<int32_t>(rows.row_seq);
  auto kernel = walk == Walk::split ? attention_mma_kernel<D, Walk::split>
                : walk == Walk::block ? attention_mma_kernel<D, Walk::block>
                                      : attention_mma_kernel<D, Walk::warp>;
  cuda::launch(kernel, unsigned(blocks), threads, shared, context.launches, cuda::ptr<float>(q),
               cuda::ptr<float>(cache.k), cuda::ptr<float>(cache.v), positions, row_seq,
               cuda::ptr<int32_t>(rows.page_tables), max_pages, int(heads), int(kv_heads), page_shift, scale,
               max_splits, splits, cuda::ptr<float>(out));
  if (walk == Walk::split)
    cuda::attention_parts::launch_attention_fold(context.launches, unsigned(pairs), positions, heads, kv_heads, D,
                                                 kSplit, max_splits, 1, splits, cuda::ptr<float>(out));
}

}  // namespace

namespace cuda {

bool attention_mma(Context& context, const Tensor& q, const KvLayer& cache, const AttentionRows& rows, float scale,
                   const Tensor& out) {
  const int64_t heads = q.shape[1], head_dim = q.shape[2], kv_heads = cache.k.shape[1];
  // LOCKSTEP_CUDA_ATTENTION_MMA=0 runs the scalar kernel instead, for side-by-side timings (its
  // replies are exact too, but not the same bits as this kernel's).
  static const bool on = !switched_off("LOCKSTEP_CUDA_ATTENTION_MMA");
  if (!on || heads % kv_heads != 0 || heads / kv_heads > 16) return false;
  switch (head_dim) {
    case 16: launch_attention_mma<16>(context, q, cache, rows, scale, out); return true;
    case 32: launch_attention_mma<32>(context, q, cache, rows, scale, out); return true;
    case 64: launch_attention_mma<64>(context, q, cache, rows, scale, out); return true;
    case 128: launch_attention_mma<128>(context, q, cache, rows, scale, out); return true;
    default: return false;
  }
}

}  // namespace cuda
}  // namespace lockstep
