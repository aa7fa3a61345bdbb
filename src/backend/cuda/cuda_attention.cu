// CUDA paged attention. One block per (query row, KV head) serves every query head that reads
// that KV head (GQA), so each cached key and value is read once per row, not once per head.
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
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"

namespace lockstep {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kSplit = int(kAttentionSplit);
constexpr int kTile = 32;         // positions staged at a time
constexpr int kMaxColumns = 16;   // (head, column) pairs per thread: heads per KV head x head_dim <= 4096
constexpr size_t kMaxShared = size_t(160) << 10;

struct Layout {  // the block's shared memory, in floats
  int64_t heads_per_kv, head_dim;
  __host__ __device__ int64_t query() const { return 0; }                                // [H, head_dim]
  __host__ __device__ int64_t weights() const { return heads_per_kv * head_dim; }        // [H, kSplit]
  __host__ __device__ int64_t tile() const { return weights() + heads_per_kv * kSplit; }  // [kTile, head_dim + 1]
  __host__ __device__ int64_t per_head() const { return tile() + kTile * (head_dim + 1); }  // [4, H]
  __host__ __device__ int64_t floats() const { return per_head() + 4 * heads_per_kv; }
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

__global__ void __launch_bounds__(kThreads)
    attention_kernel(const float* __restrict__ q, const float* __restrict__ k_cache, const float* __restrict__ v_cache,
                     const int32_t* positions, const int32_t* row_seq, const int32_t* page_tables, int64_t max_pages,
                     int64_t heads, int64_t kv_heads, int head_dim, int64_t page_size, float scale,
                     float* __restrict__ out) {
  extern __shared__ float shared[];
  const int64_t heads_per_kv = heads / kv_heads;
  const Layout layout{heads_per_kv, head_dim};
  float* query = shared + layout.query();
  float* weights = shared + layout.weights();
  float* tile = shared + layout.tile();
  float* split_max = shared + layout.per_head();
  float* total_sum = split_max + heads_per_kv;
  float* keep = total_sum + heads_per_kv;
  float* add = keep + heads_per_kv;

  const int64_t r = blockIdx.x / kv_heads, g = blockIdx.x % kv_heads;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int pairs = int(heads_per_kv) * head_dim;
  const float* q_rows = q + (r * heads + g * heads_per_kv) * head_dim;
  for (int i = t; i < pairs; i += kThreads) query[i] = q_rows[i];
  const int32_t* pages = page_tables + int64_t(row_seq[r]) * max_pages;
  const int64_t length = int64_t(positions[r]) + 1;
  const int64_t page_stride = kv_heads * page_size * head_dim;
  const float* k_base = k_cache + g * page_size * head_dim;
  const float* v_base = v_cache + g * page_size * head_dim;

  float total[kMaxColumns], part[kMaxColumns];  // pair t + i * kThreads: head (.) / head_dim, column (.) % head_dim
  float total_max = -INFINITY;                  // per head, kept by every thread that needs it
#pragma unroll
  for (int i = 0; i < kMaxColumns; ++i) total[i] = 0.0f;
  if (t < heads_per_kv) total_sum[t] = 0.0f;

  for (int64_t split = 0; split < length; split += kSplit) {
    const int count = int(cuda::min64(kSplit, length - split));
    // Scores of the split's positions into weights[j][p].
    for (int first = 0; first < count; first += kTile) {
      const int staged = min(kTile, count - first);
      __syncthreads();  // the tile is free
      stage(tile, k_base, pages, split + first, staged, page_size, page_stride, head_dim);
      __syncthreads();
      for (int64_t j = warp; j < heads_per_kv; j += kWarps) {
        if (lane < staged) {
          const float* key = tile + lane * (head_dim + 1);
          const float* qj = query + j * head_dim;
          float dot = 0.0f;
          for (int i = 0; i < head_dim; ++i) dot = fmaf(qj[i], key[i], dot);
          weights[j * kSplit + first + lane] = __fmul_rn(dot, scale);
        }
      }
    }
    __syncthreads();
    // Per head: the split's max, the weights and their sum; then the fold factors.
    for (int64_t j = warp; j < heads_per_kv; j += kWarps) {
      float* w = weights + j * kSplit;
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
      if (lane == 0) split_max[j] = top, keep[j] = sum;  // keep[] holds the split's sum until the fold below
    }
    __syncthreads();
    if (t < heads_per_kv) {
      const float split_sum = keep[t];
      const float new_max = fmaxf(total_max, split_max[t]);
      keep[t] = expf(__fsub_rn(total_max, new_max));
      add[t] = expf(__fsub_rn(split_max[t], new_max));
      total_sum[t] = fmaf(total_sum[t], keep[t], __fmul_rn(split_sum, add[t]));
      total_max = new_max;
    }
    // Values: part = sum over the split's positions in order of weight * value.
#pragma unroll
    for (int i = 0; i < kMaxColumns; ++i) part[i] = 0.0f;
    for (int first = 0; first < count; first += kTile) {
      const int staged = min(kTile, count - first);
      __syncthreads();  // the tile is free (and, the first time, keep[] and add[] are written)
      stage(tile, v_base, pages, split + first, staged, page_size, page_stride, head_dim);
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kMaxColumns; ++i) {
        const int pair = t + i * kThreads;
        if (pair >= pairs) break;
        const int j = pair / head_dim, c = pair % head_dim;
        const float* w = weights + j * kSplit + first;
        float acc = part[i];
        for (int p = 0; p < staged; ++p) acc = fmaf(w[p], tile[p * (head_dim + 1) + c], acc);
        part[i] = acc;
      }
    }
#pragma unroll
    for (int i = 0; i < kMaxColumns; ++i) {
      const int pair = t + i * kThreads;
      if (pair >= pairs) break;
      const int j = pair / head_dim;
      total[i] = fmaf(total[i], keep[j], __fmul_rn(part[i], add[j]));
    }
    __syncthreads();  // keep[], add[] and weights[] are rewritten by the next split
  }
  float* out_rows = out + (r * heads + g * heads_per_kv) * head_dim;
#pragma unroll
  for (int i = 0; i < kMaxColumns; ++i) {
    const int pair = t + i * kThreads;
    if (pair >= pairs) break;
    out_rows[pair] = total[i] / total_sum[pair / head_dim];
  }
}

}  // namespace

void CudaBackend::attention(const Tensor& q, const KvLayer& cache, const AttentionRows& rows, float scale,
                            const Tensor& out) {
  const int64_t n_rows = q.shape[0], heads = q.shape[1], head_dim = q.shape[2], kv_heads = cache.k.shape[1];
  if (n_rows == 0) return;
  const Layout layout{heads / kv_heads, head_dim};
  const size_t shared = size_t(layout.floats()) * sizeof(float);
  cuda::require(heads % kv_heads == 0 && heads / kv_heads <= kThreads &&
                    heads / kv_heads * head_dim <= int64_t(kMaxColumns) * kThreads && shared <= kMaxShared,
                "attention: heads per KV head x head_dim over 4096, or too large for shared memory");
  static const bool opted_in = [] {
    LOCKSTEP_CUDA(cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMaxShared)));
    return true;
  }();
  (void)opted_in;
  enqueue(cuda::launch_key("attention_kernel", q, cache, rows, scale, out), [=](void* stream) {
    attention_kernel<<<unsigned(n_rows * kv_heads), kThreads, shared, static_cast<cudaStream_t>(stream)>>>(
        cuda::ptr<float>(q), cuda::ptr<float>(cache.k), cuda::ptr<float>(cache.v), cuda::ptr<int32_t>(rows.positions),
        cuda::ptr<int32_t>(rows.row_seq), cuda::ptr<int32_t>(rows.page_tables), rows.page_tables.cols(), heads,
        kv_heads, int(head_dim), cache.page_size(), scale, cuda::ptr<float>(out));
    LOCKSTEP_LAUNCHED();
  });
}

}  // namespace lockstep
