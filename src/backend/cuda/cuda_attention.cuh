// Shared by the two attention kernels (cuda_attention.cu, scalar; cuda_attention_mma.cu, tensor
// cores): how a split's (max, sum, columns) joins the running ones, and the kernel that folds
// split-parallel results in order. Both kernels fold with these, so a row's bits do not depend
// on whether its splits ran in one block or in many.
#pragma once

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_context.cuh"
#include "backend/cuda/cuda_launches.cuh"

namespace lockstep::cuda::attention_parts {

// How one split joins the running (max, sum): the running values are scaled by keep, the
// split's by add.
struct Fold {
  float keep, add;
};

__device__ inline Fold fold(float& total_max, float& total_sum, float split_max, float split_sum) {
  const float new_max = fmaxf(total_max, split_max);
  const Fold f{expf(__fsub_rn(total_max, new_max)), expf(__fsub_rn(split_max, new_max))};
  total_sum = fmaf(total_sum, f.keep, __fmul_rn(split_sum, f.add));
  total_max = new_max;
  return f;
}

__device__ inline float fold_column(float total, float part, const Fold& f) {
  return fmaf(total, f.keep, __fmul_rn(part, f.add));
}

// Folds split-parallel results in split order into out: `splits` holds, for block x = (row,
// KV head, share of its query heads) and split s, [x][s][H * (head_dim + 2)] (per head its max
// and sum, then its columns), H = heads / kv_heads / shares; a row has ceil(length /
// split_size) splits.
void launch_attention_fold(Launches& launches, unsigned blocks, const int32_t* positions, int64_t heads,
                           int64_t kv_heads, int head_dim, int64_t split_size, int64_t max_splits, int64_t shares,
                           const float* splits, float* out);

}  // namespace lockstep::cuda::attention_parts

namespace lockstep::cuda {

// Attention on the tensor cores (cuda_attention_mma.cu): runs it and returns true when the
// shape is one it takes (at most 16 query heads per KV head, head_dim 16, 32, 64 or 128),
// else returns false and launches nothing. Which kernel runs depends on the model's shape
// alone, so every pass of a model uses the same one.
bool attention_mma(Context& context, const Tensor& q, const KvLayer& cache, const AttentionRows& rows, float scale,
                   const Tensor& out);

}  // namespace lockstep::cuda
