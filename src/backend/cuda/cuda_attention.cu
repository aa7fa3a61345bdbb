// CUDA paged attention. One block per (query row, KV head) serves every query head that reads
// that KV head (GQA), so each cached key and value is read once per row, not once per head;
// when that gives few blocks (rounds of few rows), the query heads are shared out among up to
// 8 blocks per (row, KV head), each reading the keys and values again (mostly from L2), so more
// of the GPU works. Each head's arithmetic is the same wherever it runs.
// The row's positions 0..pos are read in splits of kAttentionSplit, each in tiles of kTile
// positions staged in shared memory:
//   scores: head j's score at position p is a fmaf chain over the head dimension in order,
//           times the scale;
//   weights: per head, the split's max, exp(score - max), and their sum: lane l adds positions
//           l, l + 32, ... in order, then a warp butterfly;
//   values: head j's column c is a fmaf chain over the split's positions in order;
//   fold: each split joins the running max, sum and columns in position order.
// Every step's order is fixed by the row's length alone, so a row's output is the same bits
// whatever else shares the launch.
#include "backend/cuda/cuda_attention.cuh"
#include "backend/cuda/cuda_ops.cuh"

namespace lockstep {

namespace {

using cuda::attention_parts::fold;
using cuda::attention_parts::Fold;
using cuda::attention_parts::fold_column;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kSplit = int(kAttentionSplit);
constexpr int kTile = 32;         // positions staged at a time
constexpr int kMaxColumns = 16;   // (head, column) pairs per thread: heads per KV head x head_dim <= 4096
constexpr size_t kMaxShared = size_t(160) << 10;
constexpr int64_t kSplitParallelBlocks = 256;  // (row, KV head) blocks up to which splits run in parallel
// The most (block, split) results the split-parallel path keeps (with 16 heads of 128 per KV
// head, 8.3 KB each: 136 MB); past it, as for long contexts at many rows, the in-block path.
constexpr int64_t kMaxSplitResults = 16384;

// (Row, KV head) blocks up to which the query heads are shared out among blocks.
constexpr int64_t kShareHeadsBelow = 64;

struct Layout {  // the block's shared memory, in floats; H = the block's query heads
  int64_t heads, head_dim;
  __host__ __device__ int64_t query() const { return 0; }                             // [H, head_dim]
  __host__ __device__ int64_t weights() const { return heads * head_dim; }            // [H, kSplit]
  __host__ __device__ int64_t tile() const { return weights() + heads * kSplit; }     // [kTile, head_dim + 1]
  __host__ __device__ int64_t per_head() const { return tile() + kTile * (head_dim + 1); }  // [5, H]
  __host__ __device__ int64_t floats() const { return per_head() + 5 * heads; }
};

// Stages positions [first, first + count) of one KV head into tile, a warp per position (rows
// padded by one float, so lanes reading one column each of different rows hit different banks).
__device__ void stage(float* tile, const float* base, const int32_t* pages, int64_t first, int count,
                      int64_t page_size, int64_t page_stride, int head_dim) {
  const int lane = threadIdx.x % 32;
  for (int p = threadIdx.x / 32; p < count; p += kWarps) {
    const int64_t pos = first + p;
    const float* row = base + pages[pos / page_size] * page_stride + (pos % page_size) * head_dim;
    for (int c = lane; c < head_dim; c += 32) tile[p * (head_dim + 1) + c] = row[c];
  }
}

// What every kernel here shares: the block's (row, KV head, share of its query heads), its
// shared memory and its view of the cache. Thread t holds the (head, column) pairs
// t + i * kThreads of the block's heads.
struct Block {
  float *query, *weights, *tile;
  float *split_max, *split_sum, *keep, *add, *total_sum;  // per head
  int64_t r, g, heads, first_head, length, page_size, page_stride;
  int head_dim, pairs;
  const int32_t* pages;
  const float *k_base, *v_base;
};

// Block `block` is (row, KV head, share) in that order, with `shares` shares of each KV head's
// query heads.
__device__ Block open_block(float* shared, int64_t block, const float* q, const float* k_cache, const float* v_cache,
                            const int32_t* positions, const int32_t* row_seq, const int32_t* page_tables,
                            int64_t max_pages, int64_t heads, int64_t kv_heads, int head_dim, int64_t page_size,
                            int64_t shares) {
  Block b;
  b.heads = heads / kv_heads / shares;
  const Layout layout{b.heads, head_dim};
  b.query = shared + layout.query();
  b.weights = shared + layout.weights();
  b.tile = shared + layout.tile();
  b.split_max = shared + layout.per_head();
  b.split_sum = b.split_max + b.heads;
  b.keep = b.split_sum + b.heads;
  b.add = b.keep + b.heads;
  b.total_sum = b.add + b.heads;
  b.r = block / shares / kv_heads, b.g = block / shares % kv_heads;
  b.first_head = b.g * (heads / kv_heads) + block % shares * b.heads;
  b.head_dim = head_dim;
  b.pairs = int(b.heads) * head_dim;
  b.pages = page_tables + int64_t(row_seq[b.r]) * max_pages;
  b.length = int64_t(positions[b.r]) + 1;
  b.page_size = page_size;
  b.page_stride = kv_heads * page_size * head_dim;
  b.k_base = k_cache + b.g * page_size * head_dim;
  b.v_base = v_cache + b.g * page_size * head_dim;
  const float* q_rows = q + (b.r * heads + b.first_head) * head_dim;
  for (int i = threadIdx.x; i < b.pairs; i += kThreads) b.query[i] = q_rows[i];
  return b;
}

// One split, positions [split, split + count): per head its max score and the sum of
// exp(score - max) into split_max and split_sum, and into `part` the thread's columns of
// sum over positions in order of exp(score - max) * value. Starts and ends at a barrier.
__device__ void attend_split(const Block& b, int64_t split, int count, float scale, float (&part)[kMaxColumns]) {
  const int t = threadIdx.x, lane = t % 32, warp = t / 32, head_dim = b.head_dim;
  // Scores of the split's positions into weights[j][p].
  for (int first = 0; first < count; first += kTile) {
    const int staged = min(kTile, count - first);
    __syncthreads();  // the tile is free
    stage(b.tile, b.k_base, b.pages, split + first, staged, b.page_size, b.page_stride, head_dim);
    __syncthreads();
    for (int64_t j = warp; j < b.heads; j += kWarps) {
      if (lane < staged) {
        const float* key = b.tile + lane * (head_dim + 1);
        const float* qj = b.query + j * head_dim;
        float dot = 0.0f;
        for (int i = 0; i < head_dim; ++i) dot = fmaf(qj[i], key[i], dot);
        b.weights[j * kSplit + first + lane] = __fmul_rn(dot, scale);
      }
    }
  }
  __syncthreads();
  // Per head: the split's max, the weights and their sum.
  for (int64_t j = warp; j < b.heads; j += kWarps) {
    float* w = b.weights + j * kSplit;
    float top = -INFINITY;
    for (int p = lane; p < count; p += 32) top = fmaxf(top, w[p]);
    top = cuda::warp_max(top);
    float sum = 0.0f;
    for (int p = lane; p < count; p += 32) {
      const float e = expf(__fsub_rn(w[p], top));
      w[p] = e;
      sum = __fadd_rn(sum, e);
    }
    sum = cuda::warp_sum(sum);
    if (lane == 0) b.split_max[j] = top, b.split_sum[j] = sum;
  }
  // Values: part = sum over the split's positions in order of weight * value.
#pragma unroll
  for (int i = 0; i < kMaxColumns; ++i) part[i] = 0.0f;
  for (int first = 0; first < count; first += kTile) {
    const int staged = min(kTile, count - first);
    __syncthreads();  // the tile is free (and, the first time, the weights are written)
    stage(b.tile, b.v_base, b.pages, split + first, staged, b.page_size, b.page_stride, head_dim);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kMaxColumns; ++i) {
      const int pair = t + i * kThreads;
      if (pair >= b.pairs) break;
      const int j = pair / head_dim, c = pair % head_dim;
      const float* w = b.weights + j * kSplit + first;
      float acc = part[i];
      for (int p = 0; p < staged; ++p) acc = fmaf(w[p], b.tile[p * (head_dim + 1) + c], acc);
      part[i] = acc;
    }
  }
  __syncthreads();
}

#define ATTENTION_ARGS                                                                                           \
  const float *__restrict__ q, const float *__restrict__ k_cache, const float *__restrict__ v_cache,           \
      const int32_t *positions, const int32_t *row_seq, const int32_t *page_tables, int64_t max_pages,          \
      int64_t heads, int64_t kv_heads, int head_dim, int64_t page_size, int64_t shares
#define ATTENTION_PASS \
  q, k_cache, v_cache, positions, row_seq, page_tables, max_pages, heads, kv_heads, head_dim, page_size, shares

// One block per (row, KV head) walks every split in order.
__global__ void __launch_bounds__(kThreads) attention_kernel(ATTENTION_ARGS, float scale, float* __restrict__ out) {
  cuda::start_kernel();
  extern __shared__ float shared[];
  const Block b = open_block(shared, blockIdx.x, ATTENTION_PASS);
  const int t = threadIdx.x;
  float total[kMaxColumns], part[kMaxColumns];
  float total_max = -INFINITY;  // per head, kept by thread j for head j
#pragma unroll
  for (int i = 0; i < kMaxColumns; ++i) total[i] = 0.0f;
  if (t < b.heads) b.total_sum[t] = 0.0f;
  for (int64_t split = 0; split < b.length; split += kSplit) {
    attend_split(b, split, int(cuda::min64(kSplit, b.length - split)), scale, part);
    if (t < b.heads) {
      const Fold f = fold(total_max, b.total_sum[t], b.split_max[t], b.split_sum[t]);
      b.keep[t] = f.keep, b.add[t] = f.add;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kMaxColumns; ++i) {
      const int pair = t + i * kThreads;
      if (pair >= b.pairs) break;
      const int j = pair / head_dim;
      total[i] = fold_column(total[i], part[i], Fold{b.keep[j], b.add[j]});
    }
  }
  __syncthreads();
  float* out_rows = out + (b.r * heads + b.first_head) * head_dim;
#pragma unroll
  for (int i = 0; i < kMaxColumns; ++i) {
    const int pair = t + i * kThreads;
    if (pair >= b.pairs) break;
    out_rows[pair] = total[i] / b.total_sum[pair / head_dim];
  }
}

// The split-parallel path for rounds of few rows, whose (row, KV head) blocks alone would leave
// most of the GPU idle on long contexts: block (x, y) computes split y of (row, KV head) x into
// `splits`, [block][split][H * (head_dim + 2)] (the max and sum per head, then the columns);
// attention_fold_kernel folds them in order.
__global__ void __launch_bounds__(kThreads)
    attention_split_kernel(ATTENTION_ARGS, float scale, int64_t max_splits, float* __restrict__ splits) {
  cuda::start_kernel();
  extern __shared__ float shared[];
  const Block b = open_block(shared, blockIdx.x, ATTENTION_PASS);
  const int64_t split = int64_t(blockIdx.y) * kSplit;
  if (split >= b.length) return;  // the whole block leaves together
  float part[kMaxColumns];
  attend_split(b, split, int(cuda::min64(kSplit, b.length - split)), scale, part);
  float* result = splits + (int64_t(blockIdx.x) * max_splits + blockIdx.y) * b.heads * (head_dim + 2);
  const int t = threadIdx.x;
  if (t < b.heads) result[2 * t] = b.split_max[t], result[2 * t + 1] = b.split_sum[t];
#pragma unroll
  for (int i = 0; i < kMaxColumns; ++i) {
    const int pair = t + i * kThreads;
    if (pair >= b.pairs) break;
    result[2 * b.heads + pair] = part[i];
  }
}

// Folds block x's splits for one of its heads: block (x, head) of the grid; thread t takes the
// columns t, t + blockDim.x, ...; the splits are read kFoldAhead at a time ahead of their fold,
// so the reads of a long row's many splits overlap.
constexpr int kFoldAhead = 8;

__global__ void __launch_bounds__(kThreads)
    attention_fold_kernel(const int32_t* positions, int64_t heads, int64_t kv_heads, int head_dim, int64_t split_size,
                          int64_t max_splits, int64_t shares, const float* __restrict__ splits,
                          float* __restrict__ out) {
  cuda::start_kernel();
  // Block x is (row, KV head, share), as in attention_split_kernel.
  const int64_t block_heads = heads / kv_heads / shares;
  const int64_t x = blockIdx.x / block_heads, j = blockIdx.x % block_heads;
  const int64_t r = x / shares / kv_heads, g = x / shares % kv_heads;
  const int64_t first_head = g * (heads / kv_heads) + x % shares * block_heads;
  const int64_t length = int64_t(positions[r]) + 1, stride = block_heads * (head_dim + 2);
  const int64_t n_splits = (length + split_size - 1) / split_size;
  const float* results = splits + x * max_splits * stride;
  float* out_head = out + (r * heads + first_head + j) * head_dim;
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    float total = 0.0f, total_max = -INFINITY, total_sum = 0.0f;
    for (int64_t first = 0; first < n_splits; first += kFoldAhead) {
      float split_max[kFoldAhead], split_sum[kFoldAhead], part[kFoldAhead];
#pragma unroll
      for (int i = 0; i < kFoldAhead; ++i) {
        if (first + i >= n_splits) break;
        const float* result = results + (first + i) * stride;
        split_max[i] = result[2 * j], split_sum[i] = result[2 * j + 1];
        part[i] = result[2 * block_heads + j * head_dim + c];
      }
#pragma unroll
      for (int i = 0; i < kFoldAhead; ++i) {
        if (first + i >= n_splits) break;
        const Fold f = fold(total_max, total_sum, split_max[i], split_sum[i]);
        total = fold_column(total, part[i], f);
      }
    }
    out_head[c] = total / total_sum;
  }
}

}  // namespace

namespace cuda {

void attention_parts::launch_attention_fold(Launches& launches, unsigned blocks, const int32_t* positions,
                                            int64_t heads, int64_t kv_heads, int head_dim, int64_t split_size,
                                            int64_t max_splits, int64_t shares, const float* splits, float* out) {
  const int64_t block_heads = heads / kv_heads / shares;
  launch(attention_fold_kernel, unsigned(blocks * block_heads), head_dim < kThreads ? head_dim : kThreads, 0, launches,
         positions, heads, kv_heads, head_dim, split_size, max_splits, shares, splits, out);
}

void attention(Context& context, const Tensor& q, const KvLayer& cache, const AttentionRows& rows, float scale,
               const Tensor& out) {
  const int64_t n_rows = q.shape[0], heads = q.shape[1], head_dim = q.shape[2], kv_heads = cache.k.shape[1];
  if (n_rows == 0 || attention_mma(context, q, cache, rows, scale, out)) return;
  const int64_t blocks = n_rows * kv_heads;
  // Few (row, KV head) blocks: share each KV head's query heads out among up to 8 blocks, at
  // least two heads a block (fewer would read the keys and values more for no shorter block).
  const int64_t per_kv = heads / kv_heads;
  int64_t shares = 1;
  while (blocks * shares < kShareHeadsBelow && shares < 8 && per_kv % (2 * shares) == 0 && per_kv / (2 * shares) >= 2)
    shares *= 2;
  const Layout layout{heads / kv_heads / shares, head_dim};
  const size_t shared = size_t(layout.floats()) * sizeof(float);
  require(heads % kv_heads == 0 && heads / kv_heads <= kThreads &&
                    heads / kv_heads * head_dim <= int64_t(kMaxColumns) * kThreads && shared <= kMaxShared,
                "attention: heads per KV head x head_dim over 4096, or too large for shared memory");
  static const bool opted_in = [] {
    LOCKSTEP_CUDA(cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMaxShared)));
    LOCKSTEP_CUDA(
        cudaFuncSetAttribute(attention_split_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMaxShared)));
    return true;
  }();
  (void)opted_in;
  const int64_t max_pages = rows.page_tables.cols();
  const int64_t max_splits = (max_pages * cache.page_size() + kSplit - 1) / kSplit;
  // Few (row, KV head) blocks and room for long rows: each split gets a block of its own.
  const bool split_parallel =
      blocks <= kSplitParallelBlocks && max_splits > 1 && blocks * max_splits <= kMaxSplitResults;
  float* splits = nullptr;
  if (split_parallel)
    splits = static_cast<float*>(context.scratch.attention_splits.get(
        context.launches, size_t(blocks * max_splits * (heads / kv_heads) * (head_dim + 2)) * sizeof(float)));
  const unsigned launched = unsigned(blocks * shares);
  const float *q_at = ptr<float>(q), *k_at = ptr<float>(cache.k), *v_at = ptr<float>(cache.v);
  const int32_t *positions = ptr<int32_t>(rows.positions), *row_seq = ptr<int32_t>(rows.row_seq);
  const int32_t* page_tables = ptr<int32_t>(rows.page_tables);
  if (!split_parallel) {
    launch(attention_kernel, launched, kThreads, shared, context.launches, q_at, k_at, v_at, positions, row_seq,
           page_tables, max_pages, heads, kv_heads, int(head_dim), cache.page_size(), shares, scale, ptr<float>(out));
    return;
  }
  launch(attention_split_kernel, dim3(launched, unsigned(max_splits)), kThreads, shared, context.launches, q_at, k_at,
         v_at, positions, row_seq, page_tables, max_pages, heads, kv_heads, int(head_dim), cache.page_size(), shares,
         scale, max_splits, splits);
  cuda::attention_parts::launch_attention_fold(context.launches, launched, positions, heads, kv_heads, int(head_dim),
                                               kSplit, max_splits, shares, splits, ptr<float>(out));
}

}  // namespace cuda
}  // namespace lockstep
