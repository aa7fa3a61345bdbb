// CUDA paged attention. One block per (query row, head) reads the sequence's positions
// 0..pos in splits of kAttentionSplit: thread t scores position split + t, the block takes the
// split's max and sum of exponentials in a fixed order, thread i sums the weighted values of
// column i in position order, and the splits are folded into the running total in order. The
// arithmetic of a row depends only on its query and its sequence's cache.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"

namespace lockstep {

namespace {

constexpr int kThreads = int(kAttentionSplit);  // one thread per position of a split
constexpr int kMaxHeadDim = kThreads;

__global__ void __launch_bounds__(kThreads)
    attention_kernel(const float* __restrict__ q, const float* __restrict__ k_cache, const float* __restrict__ v_cache,
                     const int32_t* positions, const int32_t* row_seq, const int32_t* page_tables, int64_t max_pages,
                     int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t page_size, float scale,
                     float* __restrict__ out) {
  __shared__ float query[kMaxHeadDim];
  __shared__ float weights[kThreads];
  __shared__ float reduce[kThreads / 32];
  const int64_t r = blockIdx.x / heads, h = blockIdx.x % heads;
  const int64_t g = h / (heads / kv_heads);
  const int t = threadIdx.x;
  const float* q_row = q + (r * heads + h) * head_dim;
  if (t < head_dim) query[t] = q_row[t];
  const int32_t* pages = page_tables + int64_t(row_seq[r]) * max_pages;
  const int64_t length = int64_t(positions[r]) + 1;
  const int64_t page_stride = kv_heads * page_size * head_dim;
  const float* k_base = k_cache + g * page_size * head_dim;
  const float* v_base = v_cache + g * page_size * head_dim;
  float total_max = -INFINITY, total_sum = 0.0f, total = 0.0f;  // total: column t's weighted sum
  __syncthreads();
  for (int64_t split = 0; split < length; split += kThreads) {
    const int64_t count = cuda::min64(kThreads, length - split);
    float score = -INFINITY;
    if (t < count) {
      const int64_t pos = split + t;
      const float* key = k_base + pages[pos / page_size] * page_stride + (pos % page_size) * head_dim;
      float dot = 0.0f;
      for (int64_t i = 0; i < head_dim; ++i) dot = fmaf(query[i], key[i], dot);
      score = dot * scale;
    }
    const float split_max = cuda::block_max<kThreads>(score, reduce);
    const float weight = t < count ? expf(score - split_max) : 0.0f;
    weights[t] = weight;
    const float split_sum = cuda::block_sum<kThreads>(weight, reduce);  // its barriers publish weights[]
    float part = 0.0f;
    if (t < head_dim) {
      for (int64_t s = 0; s < count; ++s) {
        const int64_t pos = split + s;
        const float* value = v_base + pages[pos / page_size] * page_stride + (pos % page_size) * head_dim;
        part = fmaf(weights[s], value[t], part);
      }
    }
    const float new_max = fmaxf(total_max, split_max);
    const float keep = expf(total_max - new_max), add = expf(split_max - new_max);
    total_sum = total_sum * keep + split_sum * add;
    total = total * keep + part * add;
    total_max = new_max;
    __syncthreads();  // weights[] is rewritten by the next split
  }
  if (t < head_dim) out[(r * heads + h) * head_dim + t] = total / total_sum;
}

}  // namespace

void CudaBackend::attention(const Tensor& q, const KvLayer& cache, const AttentionRows& rows, float scale,
                            const Tensor& out) {
  const int64_t n_rows = q.shape[0], heads = q.shape[1], head_dim = q.shape[2];
  if (n_rows == 0) return;
  cuda::require(head_dim <= kMaxHeadDim, "attention: head_dim over 256");
  enqueue(cuda::launch_key("attention_kernel", q, cache, rows, scale, out), [=](void* stream) {
    attention_kernel<<<unsigned(n_rows * heads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        cuda::ptr<float>(q), cuda::ptr<float>(cache.k), cuda::ptr<float>(cache.v), cuda::ptr<int32_t>(rows.positions),
        cuda::ptr<int32_t>(rows.row_seq), cuda::ptr<int32_t>(rows.page_tables), rows.page_tables.cols(), heads,
        cache.k.shape[1], head_dim, cache.page_size(), scale, cuda::ptr<float>(out));
    LOCKSTEP_LAUNCHED();
  });
}

}  // namespace lockstep
