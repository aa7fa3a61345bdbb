// The op interface every backend implements. A model family is written once against it.
//
// Ops read and write Tensors that live in the backend's own memory (alloc/upload). They run
// in call order on the backend's one stream, possibly asynchronously: only download() and
// synchronize() wait. Every op computes each output row from that row's inputs alone, with a
// reduction order fixed by the op's shape settings, never by the number of rows: a row's
// result is bit-identical whatever else shares the launch (the batch-invariance contract).
#pragma once

#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/logit_edits.h"
#include "sampling/sampler.h"
#include "tensor/tensor.h"

namespace lockstep {

class Backend;

// Backend memory with its owner: freed when this goes away. Move-only.
class OwnedTensor {
 public:
  OwnedTensor() = default;
  OwnedTensor(Backend* owner, Tensor view) : owner_(owner), view_(view) {}
  OwnedTensor(OwnedTensor&& other) noexcept { *this = std::move(other); }
  OwnedTensor& operator=(OwnedTensor&& other) noexcept;
  OwnedTensor(const OwnedTensor&) = delete;
  OwnedTensor& operator=(const OwnedTensor&) = delete;
  ~OwnedTensor();

  const Tensor& view() const { return view_; }
  operator const Tensor&() const { return view_; }
  bool empty() const { return view_.data == nullptr; }

 private:
  Backend* owner_ = nullptr;
  Tensor view_;
};

// The first n rows of a buffer allocated for more: how a pass views its activation buffers.
inline Tensor rows_of(const OwnedTensor& buffer, int64_t n) { return buffer.view().first_dim_slice(0, n); }

// One attention layer's paged cache: K and V, f32 [n_pages, n_kv_heads, page_size, head_dim].
struct KvLayer {
  Tensor k;
  Tensor v;
  int64_t page_size() const { return k.shape[2]; }
};

// Which cached positions each query row reads: row r belongs to sequence row_seq[r] and
// attends to that sequence's positions 0..positions[r], found through its page table.
struct AttentionRows {
  Tensor positions;    // i32 [n_rows]
  Tensor row_seq;      // i32 [n_rows]
  Tensor page_tables;  // i32 [n_seqs, max_pages]: page ids in position order
};

// Attention reads the KV in splits of this many positions and folds them in order.
constexpr int64_t kAttentionSplit = 256;

// The sequences of a pass, for ops that carry recurrent state: the rows of sequence s are
// rows [seq_begin[s], seq_begin[s + 1]), at consecutive positions from seq_start[s], and its
// state lives in slot seq_slot[s]. A sequence starting at position 0 starts from zero state.
struct SequenceRows {
  Tensor seq_begin;  // i32 [n_seqs + 1]
  Tensor seq_start;  // i32 [n_seqs]
  Tensor seq_slot;   // i32 [n_seqs]
  // i32 [n_rows], or no data: the state slot that also receives the state after each row (-1:
  // none), for a verify window's rollback (ForwardBatch::row_slots). Only recurrent scans take it.
  Tensor row_slot;
};

// The Mamba2 selective state-space scan of one layer (see ssm_scan).
struct SsmScan {
  Tensor x;        // f32 [n, heads, head_dim]
  Tensor dt;       // f32 [n, heads], before dt_bias and softplus
  Tensor b;        // f32 [n, groups, state_size]
  Tensor c;        // f32 [n, groups, state_size]
  Tensor a_log;    // f32 [heads]: A = -exp(a_log)
  Tensor d;        // f32 [heads]: the skip
  Tensor dt_bias;  // f32 [heads]
  float dt_min = 0.0f;     // dt = max(softplus(dt + dt_bias), dt_min)
  int64_t chunk_size = 0;  // the SSD chunk: cuts at absolute multiples of it
  Tensor state;    // f32 [slots, heads, head_dim, state_size], read and written
  Tensor out;      // f32 [n, heads, head_dim]
  bool recurrent = false;  // every row by the one-row recurrence (a verify window), no SSD
};

// Mixture-of-experts routing settings (sigmoid scores with a correction bias).
struct MoeRouting {
  int64_t groups = 1;        // expert groups; the best `topk_groups` are kept per token
  int64_t topk_groups = 1;
  bool normalize = true;     // divide the chosen weights by their sum
  float scale = 1.0f;        // then multiply by this
};

// An allocation a backend refused before making it: it would not fit in the memory the backend
// has. Loading a model turns it into one error that says how much was asked and how much
// there is (models/registry.h).
class OutOfMemory : public std::bad_alloc {
 public:
  explicit OutOfMemory(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// "1.5 GiB", "312.0 MiB": a byte count for people.
std::string format_bytes(double bytes);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // The device for people: the GPU's name, or the CPU's model and threads.
  virtual std::string device() const { return std::string(name()); }

  // Memory. alloc'd memory is uninitialised. upload copies dst.bytes() from host memory;
  // download waits for pending ops, then copies src.bytes() to host memory. alloc throws
  // OutOfMemory, before allocating, for a tensor the backend's memory cannot hold.
  virtual OwnedTensor alloc(DType dtype, Shape shape) = 0;
  // Whether matmul, moe_experts and their fused forms read weights of DType::quant (rows of
  // blocks of a QuantFormat). A backend that does takes them from alloc_quantized.
  virtual bool runs_quantized() const { return false; }
  // A quantized weight [shape...], each row of the last dimension stored in `layout` (see
  // Tensor::quant), uninitialised; upload copies its bytes. Only where runs_quantized().
  virtual OwnedTensor alloc_quantized(const QuantLayout& layout, Shape shape);
  // Whether a matmul of weights in `layout` is, bit for bit, the f32 matmul of their dequantized
  // values (the CPU: every layout). Where it is not (the CUDA backend's tensor-core formats), it
  // is within a tolerance of it, and a row's bits still never depend on the other rows.
  virtual bool quant_matmul_is_f32_matmul(const QuantLayout& layout) const {
    (void)layout;
    return true;
  }
  // Bytes the backend could still allocate (an estimate: for plans, before allocating).
  virtual double free_memory() = 0;
  virtual void upload(const Tensor& dst, const void* src) = 0;
  // upload, except that on a backend that queues ops the copy may land before ops queued
  // earlier have run: only for memory that none of them reads or writes. On the GPU queued
  // launches become one graph only until an ordered upload or a download: a chain of passes
  // whose inputs go up this way runs as one.
  virtual void upload_unordered(const Tensor& dst, const void* src) { upload(dst, src); }
  virtual void download(void* dst, const Tensor& src) = 0;
  // Copies src.bytes() from src to dst (same size, both backend memory), in order with the ops.
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  virtual void synchronize() = 0;

  // out[r] = table[ids[r]]. table f32|bf16 [vocab, d]; ids i32 [n]; out f32 [n, d].
  virtual void embed(const Tensor& table, const Tensor& ids, const Tensor& out) = 0;
  // out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight. x, out f32 [rows, d]; weight f32 [d].
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) = 0;
  // out[r][c] = dot(x[r], w[c]). x f32 [n, k]; w f32|bf16 [m, k]; out f32 [n, m].
  virtual void matmul(const Tensor& x, const Tensor& w, const Tensor& out) = 0;
  // Lets the backend rearrange a matmul weight (f32|bf16 [m, k], or stacked experts
  // [experts, m, k]) for its kernels, once, after it is uploaded. From then on only matmul,
  // matmul_relu_squared, matmul_split and moe_experts may read w (not embed, nor download): a
  // tied embedding table is not prepared here (prepare_tied_table). The results' bits do not change. By default w stays as it is.
  virtual void prepare_matmul_weight(const Tensor& w) { (void)w; }
  // The same for an embedding table tied to the LM head, where the backend's embed reads the
  // rearranged table too (the CPU's MLX 4-bit halves order); by default it stays as it is.
  virtual void prepare_tied_table(const Tensor& table) { (void)table; }
  // out = relu_squared(matmul(x, w)): a relu2 MLP's up projection, which a backend may run as
  // one kernel with the same bits as the two ops.
  virtual void matmul_relu_squared(const Tensor& x, const Tensor& w, const Tensor& out) {
    matmul(x, w, out);
    relu_squared(out, out);
  }
  // out = matmul(x, w), then split_columns(out, outs): a projection whose columns are several
  // tensors (Mamba2's z, xBC and dt; attention's q, k and v), which a backend may write
  // straight into outs with the same bits (out's contents are then unspecified).
  virtual void matmul_split(const Tensor& x, const Tensor& w, const Tensor& out, const std::vector<Tensor>& outs) {
    matmul(x, w, out);
    split_columns(out, outs);
  }
  // x[r] += bias, in place. x f32 [rows, d]; bias f32 [d].
  virtual void add_bias(const Tensor& x, const Tensor& bias) = 0;
  // out = a + b, elementwise f32.
  virtual void add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // out[r] = rms_norm(x[rows[r]]): a gather and a norm, which a backend may run as one kernel
  // with the same bits as the two ops. rows i32 [n]; out f32 [n, d].
  virtual void rms_norm_rows(const Tensor& x, const Tensor& rows, const Tensor& weight, float eps, const Tensor& out) {
    gather_rows(x, rows, out);
    rms_norm(out, weight, eps, out);
  }
  // out[r] = rms_norm(table[ids[r]]): embed and a norm, which a backend may run as one kernel
  // with the same bits as the two ops. out f32 [n, d].
  virtual void embed_rms_norm(const Tensor& table, const Tensor& ids, const Tensor& weight, float eps,
                              const Tensor& out) {
    embed(table, ids, out);
    rms_norm(out, weight, eps, out);
  }
  // x += delta, then out = rms_norm(x): a residual add and the next layer's norm, which a
  // backend may run as one kernel with the same bits as the two ops.
  virtual void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& weight, float eps,
                            const Tensor& out) {
    add(x, delta, x);
    rms_norm(x, weight, eps, out);
  }
  // Rotates each head of x in place by its row's position (the rotate-half convention).
  // x f32 [n, heads, head_dim]; positions i32 [n]; cos_sin f32 [max_pos, head_dim] holding
  // cos in its first half and sin in its second.
  virtual void rope(const Tensor& x, const Tensor& positions, const Tensor& cos_sin) = 0;
  // out = silu(gate) * up. f32 [n, d].
  virtual void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  // Stores row r's k and v at cache slot slots[r] (page * page_size + offset).
  // k, v f32 [n, n_kv_heads, head_dim]; slots i32 [n].
  virtual void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, const KvLayer& cache) = 0;
  // Causal attention of each query row over its sequence's cached positions (GQA: query head
  // h reads kv head h / (heads / kv_heads)). q, out f32 [n, heads, head_dim].
  virtual void attention(const Tensor& q, const KvLayer& cache, const AttentionRows& rows, float scale,
                         const Tensor& out) = 0;
  // ids[r] = the token Sampler::sample picks from logits row r with rows[r] (greedy rows: the
  // argmax), so only ids need leave the backend. logits f32 [n, vocab]; ids i32 [n]; rows: n
  // entries, each passing validate().
  virtual void sample(const Tensor& logits, const std::vector<SampleRow>& rows, const Tensor& ids) = 0;
  // sample() with every row greedy: ids[r] = the argmax of logits row r (the lowest id of a tie).
  // A backend may do it without sending row settings (so a chain of passes never waits on one).
  virtual void argmax(const Tensor& logits, const Tensor& ids) {
    sample(logits, std::vector<SampleRow>(size_t(logits.rows())), ids);
  }
  // A request's penalties and logit_bias (sampling/logit_edits.h): logits[e.row][e.token] =
  // edited_logit(that, e) for each edit, in place, before sample. logits f32 [n, vocab]; each
  // (row, token) at most once.
  virtual void edit_logits(const Tensor& logits, const std::vector<LogitEdit>& edits) = 0;
  // Constrained decoding (grammar/token_masks.h): logits[rows[i]][t] = -inf wherever bit t of
  // row i's mask is 0, in place, after edit_logits. The masks are (vocab + 31) / 32 words each,
  // one after another in `bits`: bit t is bit (t % 32) of word t / 32.
  virtual void mask_logits(const Tensor& logits, const std::vector<int32_t>& rows, const std::vector<uint32_t>& bits) = 0;
  // The log-probabilities (log-softmax of the raw logits) around each row's chosen id:
  // logprobs[r][0] = that of ids[r]; logprobs[r][1 + j] = that of top_ids[r][j], the (j+1)-th
  // most likely id (ties to the lower id). A row's results depend on its logits and id alone,
  // and its first k alternatives are the same whatever `top` the launch has. logits f32 [n, vocab]; ids i32 [n]; logprobs f32 [n, 1 + top]; top_ids i32 [n, top].
  virtual void token_logprobs(const Tensor& logits, const Tensor& ids, const Tensor& logprobs,
                              const Tensor& top_ids) = 0;
  // out[i] = x[rows[i]]. x f32 [n, d]; rows i32 [m]; out f32 [m, d].
  virtual void gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out) = 0;
  // Cuts each row of x into consecutive column ranges: outs[0] gets its first w0 columns, outs[1]
  // the next w1, ... (w = each out's cols(); their sum at most x.cols(); at most 4 outs).
  // x f32 [n, d]; outs f32 [n, w].
  virtual void split_columns(const Tensor& x, const std::vector<Tensor>& outs) = 0;
  // The inverse: each row of out is the same row of parts[0], then of parts[1], ... (any number
  // of parts; their widths add up to out.cols()). parts f32 [n, w]; out f32 [n, d].
  virtual void join_columns(const std::vector<Tensor>& parts, const Tensor& out) = 0;
  // out = max(x, 0)^2, elementwise f32.
  virtual void relu_squared(const Tensor& x, const Tensor& out) = 0;

  // Mamba2 ops. Each sequence's rows are processed in position order with its own state; a
  // row never reads another sequence's rows or state.
  //
  // Causal depthwise conv of kernel K with bias, then SiLU. x, out f32 [n, channels];
  // weight f32 [channels, K]; bias f32 [channels]; conv_state f32 [slots, channels, K - 1]
  // holds each sequence's last K - 1 inputs and is updated.
  virtual void conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& conv_state,
                           const SequenceRows& seqs, const Tensor& out) = 0;
  // conv1d_silu, then split_columns(out, outs) (Mamba2's x, B and C), which a backend may write
  // straight into outs with the same bits (out's contents are then unspecified).
  virtual void conv1d_silu_split(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& conv_state,
                                 const SequenceRows& seqs, const Tensor& out, const std::vector<Tensor>& outs) {
    conv1d_silu(x, weight, bias, conv_state, seqs, out);
    split_columns(out, outs);
  }
  // The selective scan: h = exp(dt*A) h + dt x B^T, y = h C + D x, per head (heads share
  // their group's B and C). A sequence's rows are cut at absolute multiples of chunk_size; a
  // piece of one row runs the recurrence, a longer piece the SSD chunked form. The cuts are a
  // pure function of positions, so a fixed fill plan gives bit-identical states. With
  // scan.recurrent every row runs the recurrence, as one-row passes would, one after another.
  virtual void ssm_scan(const SsmScan& scan, const SequenceRows& seqs) = 0;
  // out = weight * rms_norm_per_group(x * silu(gate)). x, gate, out f32 [n, d]; weight [d].
  virtual void gated_rms_norm(const Tensor& x, const Tensor& gate, const Tensor& weight, int64_t groups, float eps,
                              const Tensor& out) = 0;

  // MoE ops. Routing: score = sigmoid(logit); experts are chosen by score + bias within the
  // best groups; ids come in rank order (best first, ties to the lower id); weights are the
  // chosen scores, normalised and scaled. logits f32 [n, experts]; bias f32 [experts];
  // ids i32 [n, k]; weights f32 [n, k].
  virtual void moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& routing, const Tensor& ids,
                         const Tensor& weights) = 0;
  // out[r] = the sum over ranks j of weights[r][j] * E_e(x[r]), e = ids[r][j], then of E_e(x[r])
  // for each of the last `always` experts (a MoE layer's shared expert, cut into experts of
  // the routed ones' width), in that order; E_e(x) = down_e(relu2(up_e(x))). ids pick among the
  // first experts - always. x, out f32 [n, d]; up f32|bf16 [experts, inner, d]; down f32|bf16
  // [experts, d, inner].
  virtual void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& up,
                           const Tensor& down, int64_t always, const Tensor& out) = 0;
  // A MoE layer from its router logits: moe_route into ids and weights, then moe_experts into
  // out. A backend may run the two in fewer launches, with the same results.
  virtual void moe(const Tensor& x, const Tensor& logits, const Tensor& bias, const MoeRouting& routing,
                   const Tensor& up, const Tensor& down, int64_t always, const Tensor& ids, const Tensor& weights,
                   const Tensor& out) {
    moe_route(logits, bias, routing, ids, weights);
    moe_experts(x, ids, weights, up, down, always, out);
  }

 protected:
  friend class OwnedTensor;
  virtual void release(const Tensor& tensor) = 0;
  // Throws OutOfMemory unless `bytes` more fit in `available` (what the backend still has).
  void check_room(size_t bytes, const Shape& shape, double available) const;

  double allocated_bytes_ = 0;  // by alloc(), less what was released
};

}  // namespace lockstep
