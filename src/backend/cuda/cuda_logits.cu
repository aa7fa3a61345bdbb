// The logit ops beside sampling (cuda_sample.cu): the log-probabilities of a row's chosen token
// and its best alternatives, and the edits (penalties, logit_bias) and grammar masks a stream's
// row takes before its draw, each the host's rule.
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.cuh"

namespace lockstep {
namespace {

// token_logprobs: one block a row. The max, then the sum of exp(logit - max) in double, each
// thread over a fixed stride and the block's partials added in a fixed order; then `top`
// passes, each taking the best logit ranked after the last pass's pick (larger value, then
// lower id). Nothing depends on the other rows of the launch.
constexpr int kLogprobThreads = 256;

__device__ double block_sum_double(double v, double* partials) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  __syncthreads();
  if (threadIdx.x % 32 == 0) partials[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kLogprobThreads / 32; ++w) total += partials[w];
  return total;
}

// Whether (value, id) ranks before (best, best_id): larger value, then lower id.
__device__ inline bool ranks_before(float value, int32_t id, float best, int32_t best_id) {
  return best_id < 0 || value > best || (value == best && id < best_id);
}

__global__ void __launch_bounds__(kLogprobThreads)
    token_logprobs_kernel(const float* logits, int64_t vocab, const int32_t* ids, int64_t top, float* logprobs,
                          int32_t* top_ids) {
  cuda::start_kernel();
  __shared__ float reduce[kLogprobThreads / 32];
  __shared__ double partials[kLogprobThreads / 32];
  __shared__ float pick_value[kLogprobThreads / 32];
  __shared__ int32_t pick_id[kLogprobThreads / 32];
  const float* row = logits + int64_t(blockIdx.x) * vocab;
  float top_value = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += kLogprobThreads) top_value = fmaxf(top_value, row[i]);
  top_value = cuda::block_max<kLogprobThreads>(top_value, reduce);
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += kLogprobThreads) sum += exp(double(row[i]) - double(top_value));
  const double log_sum = double(top_value) + log(block_sum_double(sum, partials));
  float* out = logprobs + int64_t(blockIdx.x) * (1 + top);
  if (threadIdx.x == 0) out[0] = float(double(row[ids[blockIdx.x]]) - log_sum);
  float last = INFINITY;
  int32_t last_id = -1;
  for (int64_t j = 0; j < top; ++j) {
    float best = -INFINITY;
    int32_t best_id = -1;
    for (int64_t i = threadIdx.x; i < vocab; i += kLogprobThreads) {
      const float v = isnan(row[i]) ? -INFINITY : row[i];
      const bool after = v < last || (v == last && int32_t(i) > last_id);
      if (after && ranks_before(v, int32_t(i), best, best_id)) best = v, best_id = int32_t(i);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int32_t other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
      if (other_id >= 0 && ranks_before(other, other_id, best, best_id)) best = other, best_id = other_id;
    }
    __syncthreads();
    if (threadIdx.x % 32 == 0) pick_value[threadIdx.x / 32] = best, pick_id[threadIdx.x / 32] = best_id;
    __syncthreads();
    best = pick_value[0], best_id = pick_id[0];
    for (int w = 1; w < kLogprobThreads / 32; ++w)
      if (pick_id[w] >= 0 && ranks_before(pick_value[w], pick_id[w], best, best_id))
        best = pick_value[w], best_id = pick_id[w];
    if (threadIdx.x == 0) {
      out[1 + j] = best_id < 0 ? -INFINITY : float(double(best) - log_sum);
      top_ids[int64_t(blockIdx.x) * top + j] = best_id < 0 ? 0 : best_id;
    }
    last = best, last_id = best_id < 0 ? int32_t(vocab) : best_id;
  }
}

// One thread per edit: edited_logit (sampling/logit_edits.h), each product, quotient and sum
// rounded on its own as the host's are (no contraction into fused multiply-adds).
__global__ void edit_logits_kernel(float* logits, int64_t vocab, const LogitEdit* edits, int64_t n) {
  cuda::start_kernel();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const LogitEdit e = edits[i];
  float* logit = logits + int64_t(e.row) * vocab + e.token;
  float x = *logit;
  if (e.repetition != 1.0f && e.in_context) x = x > 0.0f ? __fdiv_rn(x, e.repetition) : __fmul_rn(x, e.repetition);
  x = __fsub_rn(x, __fmul_rn(e.presence, e.count > 0.0f ? 1.0f : 0.0f));
  x = __fsub_rn(x, __fmul_rn(e.frequency, e.count));
  *logit = __fadd_rn(x, e.bias);
}

// One thread per (token, masked row): a token whose bit is 0 gets -inf.
__global__ void mask_logits_kernel(float* logits, int64_t vocab, const int32_t* rows, const uint32_t* bits,
                                   int64_t words) {
  cuda::start_kernel();
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= vocab) return;
  const uint32_t word = bits[int64_t(blockIdx.y) * words + (t >> 5)];
  if (!((word >> (t & 31)) & 1)) logits[int64_t(rows[blockIdx.y]) * vocab + t] = -INFINITY;
}

}  // namespace

namespace cuda {

void mask_logits(Context& context, const Tensor& logits, const std::vector<int32_t>& rows,
                 const std::vector<uint32_t>& bits) {
  if (rows.empty()) return;
  const int64_t n = int64_t(rows.size()), vocab = logits.cols(), words = (vocab + 31) / 32;
  require(int64_t(bits.size()) == n * words, "mask_logits: one mask per row");
  Tensor staged;
  staged.dtype = DType::i32;
  staged.shape = {n + n * words};
  staged.data = context.scratch.sample.masks.get(context.launches, staged.bytes());
  std::vector<int32_t> host(size_t(n + n * words));
  std::copy(rows.begin(), rows.end(), host.begin());
  std::memcpy(host.data() + n, bits.data(), bits.size() * sizeof(uint32_t));
  context.upload(staged, host.data());
  const int32_t* device_rows = static_cast<const int32_t*>(staged.data);
  launch(mask_logits_kernel, dim3(unsigned(blocks_for(vocab, 256)), unsigned(n)), 256, 0, context.launches,
         ptr<float>(logits), vocab, device_rows, reinterpret_cast<const uint32_t*>(device_rows + n), words);
}

void edit_logits(Context& context, const Tensor& logits, const std::vector<LogitEdit>& edits) {
  if (edits.empty()) return;
  const int64_t n = int64_t(edits.size());
  Tensor staged;
  staged.dtype = DType::i32;
  staged.shape = {n * int64_t(sizeof(LogitEdit) / 4)};
  staged.data = context.scratch.sample.edits.get(context.launches, staged.bytes());
  context.upload(staged, edits.data());
  launch(edit_logits_kernel, blocks_for(n, 256), 256, 0, context.launches, ptr<float>(logits), logits.cols(),
         static_cast<const LogitEdit*>(staged.data), n);
}

void token_logprobs(Context& context, const Tensor& logits, const Tensor& ids, const Tensor& logprobs,
                    const Tensor& top_ids) {
  const int64_t n = logits.rows();
  if (n == 0) return;
  launch(token_logprobs_kernel, unsigned(n), kLogprobThreads, 0, context.launches, ptr<float>(logits), logits.cols(),
         ptr<int32_t>(ids), top_ids.cols(), ptr<float>(logprobs), ptr<int32_t>(top_ids));
}

}  // namespace cuda
}  // namespace lockstep
