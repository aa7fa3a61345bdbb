// The CPU backend: ops run synchronously on the calling thread and a thread pool. Memory is
// 64-byte aligned host memory.
//
// Code by op family: cpu_backend.cpp (memory), cpu_ops.cpp (row-wise, elementwise, sampling),
// matmul_*.cpp (matmul kernels per instruction set), cpu_attention.cpp, cpu_mamba.cpp,
// cpu_moe.cpp.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul.h"
#include "base/thread_pool.h"

namespace lockstep {

class CpuBackend final : public Backend {
 public:
  // threads <= 0: one per hardware thread. isa: the widest kernel set to use ("generic",
  // "avx2", "avx512"; empty: the best this CPU runs).
  explicit CpuBackend(int threads, std::string_view isa = "");

  std::string_view name() const override { return "cpu"; }
  std::string device() const override;  // "<model name>, N threads" from /proc/cpuinfo
  const char* isa() const { return matmul_.isa; }
  ThreadPool& pool() { return pool_; }

  OwnedTensor alloc(DType dtype, Shape shape) override;
  bool runs_quantized() const override { return true; }
  OwnedTensor alloc_quantized(const QuantLayout& layout, Shape shape) override;
  double free_memory() override;
  // Makes `bytes` the host memory this backend may take in all (default: what was free at its
  // first allocation), as a smaller machine would have it (tests).
  void limit_memory(double bytes) { host_budget_ = bytes; }
  void upload(const Tensor& dst, const void* src) override;
  void download(void* dst, const Tensor& src) override;
  void copy(const Tensor& dst, const Tensor& src) override;
  void synchronize() override {}

  void embed(const Tensor& table, const Tensor& ids, const Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override;
  void matmul(const Tensor& x, const Tensor& w, const Tensor& out) override;
  // MLX affine 4-bit weights get their codes in CodeOrder::halves (cpu/matmul.h), where the
  // kernel set decodes that order; other weights stay as they are.
  void prepare_matmul_weight(const Tensor& w) override;
  // A tied table takes the same order: embed decodes it with the set's row decoder.
  void prepare_tied_table(const Tensor& table) override { prepare_matmul_weight(table); }
  void add_bias(const Tensor& x, const Tensor& bias) override;
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void rope(const Tensor& x, const Tensor& positions, const Tensor& cos_sin) override;
  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, const KvLayer& cache) override;
  void attention(const Tensor& q, const KvLayer& cache, const AttentionRows& rows, float scale,
                 const Tensor& out) override;
  void sample(const Tensor& logits, const std::vector<SampleRow>& rows, const Tensor& ids) override;
  void edit_logits(const Tensor& logits, const std::vector<LogitEdit>& edits) override;
  void mask_logits(const Tensor& logits, const std::vector<int32_t>& rows, const std::vector<uint32_t>& bits) override;
  // compute_logprobs (sampling/logprobs.h) on each row.
  void token_logprobs(const Tensor& logits, const Tensor& ids, const Tensor& logprobs, const Tensor& top_ids) override;
  void gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out) override;
  void split_columns(const Tensor& x, const std::vector<Tensor>& outs) override;
  void join_columns(const std::vector<Tensor>& parts, const Tensor& out) override;
  void relu_squared(const Tensor& x, const Tensor& out) override;
  void conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& conv_state,
                   const SequenceRows& seqs, const Tensor& out) override;
  void ssm_scan(const SsmScan& scan, const SequenceRows& seqs) override;
  void gated_rms_norm(const Tensor& x, const Tensor& gate, const Tensor& weight, int64_t groups, float eps,
                      const Tensor& out) override;
  void moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& routing, const Tensor& ids,
                 const Tensor& weights) override;
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& up, const Tensor& down,
                   int64_t always, const Tensor& out) override;

 protected:
  void release(const Tensor& tensor) override;

 private:
  OwnedTensor allocate(Tensor view);  // view's data is set here
  double host_budget_ = -1;  // host memory free at the first alloc (-1: not yet read)
  ThreadPool pool_;
  cpu::MatmulKernels matmul_;
  // The weights prepare_matmul_weight rearranged: first byte to one past the last (an expert's
  // matrix is a slice of its stack's), until released or uploaded over (forget_prepared).
  std::map<const std::byte*, const std::byte*> halves_;
  // The first prepared range that covers `at` or starts after it.
  std::map<const std::byte*, const std::byte*>::const_iterator first_prepared(const std::byte* at) const;
  cpu::CodeOrder code_order(const Tensor& w) const;
  void forget_prepared(const Tensor& t);
  // MoE workspaces: grow to the largest pass seen, then stay.
  std::vector<float> moe_in_, moe_hidden_, moe_out_, moe_slots_;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> moe_routed_;
  std::vector<float> route_score_, route_choice_, route_group_score_;
  std::vector<int32_t> route_best_;
  std::unique_ptr<Sampler> sampler_;  // made for the vocab of the last sample() call
};

}  // namespace lockstep
