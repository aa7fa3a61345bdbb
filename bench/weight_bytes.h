// A backend that forwards every op to another and, while counting, adds up the weight bytes
// the ops read: each matmul's weight, the embedding rows, and for MoE only the experts some
// row of the pass picked, and the shared expert's (it reads the ids back, so count in an
// untimed run). This is the
// "bytes a round must read" of a bandwidth bound, counted rather than assumed.
//
// While profiling it also waits for the device after every op and adds the op's time to a
// per-op total, to show where a round's time goes (the waits cost a few microseconds each,
// so profile in an untimed run too).
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace lockstep::bench {

class WeightBytes final : public Backend {
 public:
  explicit WeightBytes(Backend& inner) : inner_(inner) {}
  bool counting = false;
  double bytes = 0.0;
  bool profiling = false;
  std::map<std::string, double> op_seconds;  // op name -> seconds, while profiling

  std::string_view name() const override { return inner_.name(); }
  OwnedTensor alloc(DType dtype, Shape shape) override { return inner_.alloc(dtype, shape); }
  bool runs_quantized() const override { return inner_.runs_quantized(); }
  OwnedTensor alloc_quantized(const QuantLayout& layout, Shape shape) override {
    return inner_.alloc_quantized(layout, shape);
  }
  double free_memory() override { return inner_.free_memory(); }
  void upload(const Tensor& dst, const void* src) override { inner_.upload(dst, src); }
  void upload_unordered(const Tensor& dst, const void* src) override { inner_.upload_unordered(dst, src); }
  void download(void* dst, const Tensor& src) override { inner_.download(dst, src); }
  void copy(const Tensor& dst, const Tensor& src) override { inner_.copy(dst, src); }
  void synchronize() override { inner_.synchronize(); }

  void embed(const Tensor& table, const Tensor& ids, const Tensor& out) override {
    if (counting) bytes += double(ids.numel()) * double(table.bytes()) / double(table.rows());
    timed("embed", [&] { inner_.embed(table, ids, out); });
  }
  void matmul(const Tensor& x, const Tensor& w, const Tensor& out) override {
    counted_matmul(x, w, [&] { inner_.matmul(x, w, out); });
  }
  void prepare_matmul_weight(const Tensor& w) override { inner_.prepare_matmul_weight(w); }
  void matmul_split(const Tensor& x, const Tensor& w, const Tensor& out, const std::vector<Tensor>& outs) override {
    counted_matmul(x, w, [&] { inner_.matmul_split(x, w, out, outs); });
  }
  void matmul_relu_squared(const Tensor& x, const Tensor& w, const Tensor& out) override {
    counted_matmul(x, w, [&] { inner_.matmul_relu_squared(x, w, out); });
  }
  // Reads the experts the round's tokens picked and the `always` ones (the shared expert).
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& up, const Tensor& down,
                   int64_t always, const Tensor& out) override {
    if (counting) count_experts(ids, up, down, always);
    timed("moe_experts", [&] { inner_.moe_experts(x, ids, weights, up, down, always, out); });
  }
  void moe(const Tensor& x, const Tensor& logits, const Tensor& bias, const MoeRouting& routing, const Tensor& up,
           const Tensor& down, int64_t always, const Tensor& ids, const Tensor& weights, const Tensor& out) override {
    timed("moe", [&] { inner_.moe(x, logits, bias, routing, up, down, always, ids, weights, out); });
    if (counting) count_experts(ids, up, down, always);  // the ids the op wrote
  }
  void count_experts(const Tensor& ids, const Tensor& up, const Tensor& down, int64_t always) {
    std::vector<int32_t> host(size_t(ids.numel()));
    inner_.download(host.data(), ids);
    std::set<int32_t> picked(host.begin(), host.end());
    bytes += double(int64_t(picked.size()) + always) * double(up.bytes() + down.bytes()) / double(up.shape[0]);
    experts_picked += double(picked.size());
    moe_layers += 1.0;
  }
  double experts_picked = 0.0, moe_layers = 0.0;

  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override {
    timed("rms_norm", [&] { inner_.rms_norm(x, weight, eps, out); });
  }
  void add_bias(const Tensor& x, const Tensor& bias) override {
    timed("add_bias", [&] { inner_.add_bias(x, bias); });
  }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override {
    timed("add", [&] { inner_.add(a, b, out); });
  }
  void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& weight, float eps,
                    const Tensor& out) override {
    timed("add_rms_norm", [&] { inner_.add_rms_norm(x, delta, weight, eps, out); });
  }
  void rope(const Tensor& x, const Tensor& positions, const Tensor& cos_sin) override {
    timed("rope", [&] { inner_.rope(x, positions, cos_sin); });
  }
  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    timed("swiglu", [&] { inner_.swiglu(gate, up, out); });
  }
  void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, const KvLayer& cache) override {
    timed("kv_write", [&] { inner_.kv_write(k, v, slots, cache); });
  }
  void attention(const Tensor& q, const KvLayer& cache, const AttentionRows& rows, float scale,
                 const Tensor& out) override {
    timed("attention", [&] { inner_.attention(q, cache, rows, scale, out); });
  }
  void sample(const Tensor& logits, const std::vector<SampleRow>& rows, const Tensor& ids) override {
    timed("sample", [&] { inner_.sample(logits, rows, ids); });
  }
  void edit_logits(const Tensor& logits, const std::vector<LogitEdit>& edits) override {
    timed("edit_logits", [&] { inner_.edit_logits(logits, edits); });
  }
  void mask_logits(const Tensor& logits, const std::vector<int32_t>& rows, const std::vector<uint32_t>& bits) override {
    timed("mask_logits", [&] { inner_.mask_logits(logits, rows, bits); });
  }
  void token_logprobs(const Tensor& logits, const Tensor& ids, const Tensor& logprobs, const Tensor& top_ids) override {
    timed("token_logprobs", [&] { inner_.token_logprobs(logits, ids, logprobs, top_ids); });
  }
  void gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out) override {
    timed("gather_rows", [&] { inner_.gather_rows(x, rows, out); });
  }
  void split_columns(const Tensor& x, const std::vector<Tensor>& outs) override {
    timed("split_columns", [&] { inner_.split_columns(x, outs); });
  }
  void join_columns(const std::vector<Tensor>& parts, const Tensor& out) override {
    timed("join_columns", [&] { inner_.join_columns(parts, out); });
  }
  void relu_squared(const Tensor& x, const Tensor& out) override {
    timed("relu_squared", [&] { inner_.relu_squared(x, out); });
  }
  void conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& conv_state,
                   const SequenceRows& seqs, const Tensor& out) override {
    timed("conv1d_silu", [&] { inner_.conv1d_silu(x, weight, bias, conv_state, seqs, out); });
  }
  void conv1d_silu_split(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& conv_state,
                         const SequenceRows& seqs, const Tensor& out, const std::vector<Tensor>& outs) override {
    timed("conv1d_silu", [&] { inner_.conv1d_silu_split(x, weight, bias, conv_state, seqs, out, outs); });
  }
  void ssm_scan(const SsmScan& scan, const SequenceRows& seqs) override {
    timed("ssm_scan", [&] { inner_.ssm_scan(scan, seqs); });
  }
  void gated_rms_norm(const Tensor& x, const Tensor& gate, const Tensor& weight, int64_t groups, float eps,
                      const Tensor& out) override {
    timed("gated_rms_norm", [&] { inner_.gated_rms_norm(x, gate, weight, groups, eps, out); });
  }
  void moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& routing, const Tensor& ids,
                 const Tensor& weights) override {
    timed("moe_route", [&] { inner_.moe_route(logits, bias, routing, ids, weights); });
  }

 protected:
  void release(const Tensor&) override {}  // alloc hands out the inner backend's tensors

 private:
  // A matmul reads all of w: counted, and timed under its shape.
  template <class F>
  void counted_matmul(const Tensor& x, const Tensor& w, F run) {
    if (counting) bytes += double(w.bytes());
    timed("matmul " + std::to_string(w.shape[0]) + "x" + std::to_string(w.cols()) + (x.rows() > 64 ? " (fill)" : ""),
          run);
  }
  template <class F>
  void timed(const std::string& op, F run) {
    if (!profiling) return run();
    inner_.synchronize();
    auto start = std::chrono::steady_clock::now();
    run();
    inner_.synchronize();
    op_seconds[op] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  Backend& inner_;
};

}  // namespace lockstep::bench
