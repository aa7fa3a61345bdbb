// The CUDA backend: every op of the Backend interface as CUDA kernels on one stream, with the
// same batch-invariance contract as the CPU backend (a row's result never depends on how many
// rows share the launch). Built only when nvcc is found (LOCKSTEP_WITH_CUDA); this header
// holds no CUDA types, so plain C++ code can include it.
//
// Each op forwards to its free function over a cuda::Context (cuda_ops.cuh), which queues its
// kernels until something waits (download, synchronize) or an upload must follow them. A
// queued pass whose launches (kernels, shapes, parameters) equal an earlier pass's is run as a
// CUDA graph: the second time a pass is seen it is captured, and from then on replayed with
// one launch (cuda_launches.cuh). Rounds of one width repeat exactly, so a round of a 52-layer
// model is one graph launch instead of hundreds. LOCKSTEP_CUDA_GRAPHS=0 turns graphs off;
// LOCKSTEP_CUDA_TRACE=1 prints each flush (launches, path, time) to stderr, waiting for each.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace lockstep {

namespace cuda {
class Context;
}

// True when a CUDA device can be used; otherwise `why` says what is missing.
bool cuda_device_available(std::string* why = nullptr);

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device = 0);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  const std::string& device_name() const { return device_name_; }
  std::string device() const override { return device_name_; }
  // The device-to-device copy rate in GB/s (bytes read plus bytes written), the median of
  // `repeats` copies of `bytes`: the bandwidth ceiling the benchmarks compare against.
  double copy_gb_per_s(size_t bytes, int repeats);
  // Sends plain bf16 matmuls to cuBLAS from now on (cuda_relaxed.h): faster where cuBLAS is, but
  // a row's bits may then depend on the round's width. For the benchmark's cost-of-exactness
  // table only. False, with the reason in `why`, when cuBLAS cannot be loaded or weights are
  // already packed (prepare_matmul_weight).
  bool use_relaxed_matmul(std::string* why);

  OwnedTensor alloc(DType dtype, Shape shape) override;
  // Every layout but FP8 with one scale for the tensor (cuda_quant.cuh), which loads never make.
  bool runs_quantized() const override { return true; }
  OwnedTensor alloc_quantized(const QuantLayout& layout, Shape shape) override;
  // False for the formats whose matmuls run on the tensor cores (cuda_matmul_quant_mma.cu).
  bool quant_matmul_is_f32_matmul(const QuantLayout& layout) const override;
  double free_memory() override;
  void upload(const Tensor& dst, const void* src) override;
  void upload_unordered(const Tensor& dst, const void* src) override;
  void download(void* dst, const Tensor& src) override;
  void copy(const Tensor& dst, const Tensor& src) override;
  void synchronize() override;

  void embed(const Tensor& table, const Tensor& ids, const Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override;
  void rms_norm_rows(const Tensor& x, const Tensor& rows, const Tensor& weight, float eps, const Tensor& out) override;
  void embed_rms_norm(const Tensor& table, const Tensor& ids, const Tensor& weight, float eps,
                      const Tensor& out) override;
  void matmul(const Tensor& x, const Tensor& w, const Tensor& out) override;
  void matmul_relu_squared(const Tensor& x, const Tensor& w, const Tensor& out) override;
  // Writes the product's columns straight into outs (the matmul kernels' column split).
  void matmul_split(const Tensor& x, const Tensor& w, const Tensor& out, const std::vector<Tensor>& outs) override;
  // Packs bf16 weights whose shape allows (cuda_matmul.cuh: packable_bf16): a warp then reads
  // each block of its weights as one contiguous 1 KB. Not in relaxed mode (cuBLAS reads rows).
  void prepare_matmul_weight(const Tensor& w) override;
  void add_bias(const Tensor& x, const Tensor& bias) override;
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& weight, float eps,
                    const Tensor& out) override;
  void rope(const Tensor& x, const Tensor& positions, const Tensor& cos_sin) override;
  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, const KvLayer& cache) override;
  void attention(const Tensor& q, const KvLayer& cache, const AttentionRows& rows, float scale,
                 const Tensor& out) override;
  void sample(const Tensor& logits, const std::vector<SampleRow>& rows, const Tensor& ids) override;
  void argmax(const Tensor& logits, const Tensor& ids) override;
  void edit_logits(const Tensor& logits, const std::vector<LogitEdit>& edits) override;
  void mask_logits(const Tensor& logits, const std::vector<int32_t>& rows, const std::vector<uint32_t>& bits) override;
  void token_logprobs(const Tensor& logits, const Tensor& ids, const Tensor& logprobs, const Tensor& top_ids) override;
  void gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out) override;
  void split_columns(const Tensor& x, const std::vector<Tensor>& outs) override;
  void join_columns(const std::vector<Tensor>& parts, const Tensor& out) override;
  void relu_squared(const Tensor& x, const Tensor& out) override;
  void conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& conv_state,
                   const SequenceRows& seqs, const Tensor& out) override;
  void conv1d_silu_split(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& conv_state,
                         const SequenceRows& seqs, const Tensor& out, const std::vector<Tensor>& outs) override;
  void ssm_scan(const SsmScan& scan, const SequenceRows& seqs) override;
  void gated_rms_norm(const Tensor& x, const Tensor& gate, const Tensor& weight, int64_t groups, float eps,
                      const Tensor& out) override;
  void moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& routing, const Tensor& ids,
                 const Tensor& weights) override;
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& up, const Tensor& down,
                   int64_t always, const Tensor& out) override;
  void moe(const Tensor& x, const Tensor& logits, const Tensor& bias, const MoeRouting& routing, const Tensor& up,
           const Tensor& down, int64_t always, const Tensor& ids, const Tensor& weights, const Tensor& out) override;

 protected:
  void release(const Tensor& tensor) override;

 private:
  OwnedTensor allocate(Tensor view);  // view's data is set here
  std::unique_ptr<cuda::Context> context_;
  std::string device_name_;
};

}  // namespace lockstep
