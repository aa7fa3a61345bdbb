// Every op of the Backend interface as a free function over the Context, by op family and the
// file that defines it. Each queues its kernels through context.launches (cuda_launches.cuh) and
// keeps backend.h's contract: a row's result never depends on the rows that share the launch.
// docs/adding-an-op.md walks through adding one.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_context.cuh"

namespace lockstep::cuda {

// cuda_ops.cu: row-wise and elementwise ops, one block per row where a row is reduced.
void embed(Context& context, const Tensor& table, const Tensor& ids, const Tensor& out);
void rms_norm(Context& context, const Tensor& x, const Tensor& weight, float eps, const Tensor& out);
// embed then rms_norm as one kernel, the same bits; false (nothing launched) for a quantized table.
bool embed_rms_norm(Context& context, const Tensor& table, const Tensor& ids, const Tensor& weight, float eps,
                    const Tensor& out);
void rms_norm_rows(Context& context, const Tensor& x, const Tensor& rows, const Tensor& weight, float eps,
                   const Tensor& out);
void add_rms_norm(Context& context, const Tensor& x, const Tensor& delta, const Tensor& weight, float eps,
                  const Tensor& out);
void add_bias(Context& context, const Tensor& x, const Tensor& bias);
void add(Context& context, const Tensor& a, const Tensor& b, const Tensor& out);
void rope(Context& context, const Tensor& x, const Tensor& positions, const Tensor& cos_sin);
void swiglu(Context& context, const Tensor& gate, const Tensor& up, const Tensor& out);
void relu_squared(Context& context, const Tensor& x, const Tensor& out);
void kv_write(Context& context, const Tensor& k, const Tensor& v, const Tensor& slots, const KvLayer& cache);
void gather_rows(Context& context, const Tensor& x, const Tensor& rows, const Tensor& out);
void split_columns(Context& context, const Tensor& x, const std::vector<Tensor>& outs);
void join_columns(Context& context, const std::vector<Tensor>& parts, const Tensor& out);

// cuda_matmul.cu: matmul, matmul_relu_squared (relu_squared) and matmul_split (outs: the
// split's tensors, or none); bf16 weights on the tensor cores (cuda_matmul_bf16.cu).
void matmul(Context& context, const Tensor& x, const Tensor& w, const Tensor& out, bool relu_squared,
            const std::vector<Tensor>& outs);
// Packs bf16 weights whose shape allows (packable_bf16), unless matmuls are relaxed.
void prepare_matmul_weight(Context& context, const Tensor& w);

// cuda_attention.cu
void attention(Context& context, const Tensor& q, const KvLayer& cache, const AttentionRows& rows, float scale,
               const Tensor& out);

// cuda_mamba.cu (with cuda_ssd.cu, the scan's SSD form for fills). conv1d_silu_split when
// outs is not empty.
void conv1d_silu(Context& context, const Tensor& x, const Tensor& weight, const Tensor& bias,
                 const Tensor& conv_state, const SequenceRows& seqs, const Tensor& out,
                 const std::vector<Tensor>& outs);
void ssm_scan(Context& context, const SsmScan& scan, const SequenceRows& seqs);
void gated_rms_norm(Context& context, const Tensor& x, const Tensor& gate, const Tensor& weight, int64_t groups,
                    float eps, const Tensor& out);

// cuda_moe.cu
void moe_route(Context& context, const Tensor& logits, const Tensor& bias, const MoeRouting& routing,
               const Tensor& ids, const Tensor& weights);
void moe_experts(Context& context, const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& up,
                 const Tensor& down, int64_t always, const Tensor& out);
void moe(Context& context, const Tensor& x, const Tensor& logits, const Tensor& bias, const MoeRouting& routing,
         const Tensor& up, const Tensor& down, int64_t always, const Tensor& ids, const Tensor& weights,
         const Tensor& out);

// cuda_sample.cu
void sample(Context& context, const Tensor& logits, const std::vector<SampleRow>& rows, const Tensor& ids);
void argmax(Context& context, const Tensor& logits, const Tensor& ids);
void edit_logits(Context& context, const Tensor& logits, const std::vector<LogitEdit>& edits);
void mask_logits(Context& context, const Tensor& logits, const std::vector<int32_t>& rows,
                 const std::vector<uint32_t>& bits);
void token_logprobs(Context& context, const Tensor& logits, const Tensor& ids, const Tensor& logprobs,
                    const Tensor& top_ids);

}  // namespace lockstep::cuda
