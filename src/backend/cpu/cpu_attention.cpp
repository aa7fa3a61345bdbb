// CPU paged attention. For each (row, query head): the sequence's positions 0..pos are read
// page by page in splits of kAttentionSplit positions; each split gives its max score, the sum
// of exponentials and the weighted sum of values, and the splits are folded in position
// order. The arithmetic of one row depends only on that row's query and its sequence's cache.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/row_math.h"

namespace lockstep {

namespace {

constexpr int64_t kMaxHeadDim = 512;

struct HeadJob {
  const float* q;          // [head_dim]
  const float* k_base;     // cache K of this kv head at page 0
  const float* v_base;
  const int32_t* pages;    // the sequence's page table
  int64_t page_stride;     // floats between pages in the cache
  int64_t page_size;
  int64_t head_dim;
  int64_t length;          // positions 0..length-1 are read
  float scale;
  float* out;              // [head_dim]
};

void attend_one_head(const HeadJob& job) {
  float scores[kAttentionSplit];
  float total_max = -std::numeric_limits<float>::infinity();
  float total_sum = 0.0f;
  float total[kMaxHeadDim] = {};
  float part[kMaxHeadDim];
  const int64_t d = job.head_dim;
  for (int64_t split = 0; split < job.length; split += kAttentionSplit) {
    const int64_t n = std::min(kAttentionSplit, job.length - split);
    float split_max = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < n; ++t) {
      int64_t pos = split + t;
      const float* key = job.k_base + job.pages[pos / job.page_size] * job.page_stride + (pos % job.page_size) * d;
      scores[t] = cpu::dot_fixed(job.q, key, d) * job.scale;
      split_max = std::max(split_max, scores[t]);
    }
    float split_sum = 0.0f;
    std::fill(part, part + d, 0.0f);
    for (int64_t t = 0; t < n; ++t) {
      int64_t pos = split + t;
      const float* value = job.v_base + job.pages[pos / job.page_size] * job.page_stride + (pos % job.page_size) * d;
      float weight = std::exp(scores[t] - split_max);
      split_sum += weight;
      for (int64_t i = 0; i < d; ++i) part[i] += weight * value[i];
    }
    // Fold this split into the running total, in position order.
    float new_max = std::max(total_max, split_max);
    float keep = std::exp(total_max - new_max);
    float add = std::exp(split_max - new_max);
    total_sum = total_sum * keep + split_sum * add;
    for (int64_t i = 0; i < d; ++i) total[i] = total[i] * keep + part[i] * add;
    total_max = new_max;
  }
  float inv = 1.0f / total_sum;
  for (int64_t i = 0; i < d; ++i) job.out[i] = total[i] * inv;
}

}  // namespace

void CpuBackend::attention(const Tensor& q, const KvLayer& cache, const AttentionRows& rows, float scale,
                           const Tensor& out) {
  const int64_t n_rows = q.shape[0];
  const int64_t heads = q.shape[1];
  const int64_t head_dim = q.shape[2];
  const int64_t kv_heads = cache.k.shape[1];
  const int64_t page_size = cache.page_size();
  const int64_t max_pages = rows.page_tables.cols();
  const int64_t group = heads / kv_heads;
  const int32_t* positions = rows.positions.as<int32_t>();
  const int32_t* row_seq = rows.row_seq.as<int32_t>();
  pool_.parallel_for(n_rows * heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t job_index = begin; job_index < end; ++job_index) {
      int64_t r = job_index / heads;
      int64_t h = job_index % heads;
      int64_t g = h / group;
      HeadJob job;
      job.q = q.as<float>() + (r * heads + h) * head_dim;
      job.k_base = cache.k.as<float>() + g * page_size * head_dim;
      job.v_base = cache.v.as<float>() + g * page_size * head_dim;
      job.pages = rows.page_tables.as<int32_t>() + int64_t(row_seq[r]) * max_pages;
      job.page_stride = kv_heads * page_size * head_dim;
      job.page_size = page_size;
      job.head_dim = head_dim;
      job.length = int64_t(positions[r]) + 1;
      job.scale = scale;
      job.out = out.as<float>() + (r * heads + h) * head_dim;
      attend_one_head(job);
    }
  });
}

}  // namespace lockstep
