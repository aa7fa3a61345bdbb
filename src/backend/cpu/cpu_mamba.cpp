// CPU Mamba2 ops: the causal conv with its state, the selective scan (single-step recurrence
// and the SSD chunked form), and the gated grouped RMSNorm.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/row_math.h"

namespace lockstep {

namespace {

inline float silu(float v) { return v / (1.0f + std::exp(-v)); }
inline float softplus(float v) { return v > 20.0f ? v : std::log1p(std::exp(v)); }

struct SeqRange {
  int64_t begin, end, start, slot;
};

// The slot that also receives the state after row r (SequenceRows::row_slot), or -1.
int64_t row_slot(const SequenceRows& seqs, int64_t r) {
  return seqs.row_slot.data ? seqs.row_slot.as<int32_t>()[r] : -1;
}

SeqRange seq_range(const SequenceRows& seqs, int64_t s) {
  const int32_t* begin = seqs.seq_begin.as<int32_t>();
  return {begin[s], begin[s + 1], seqs.seq_start.as<int32_t>()[s], seqs.seq_slot.as<int32_t>()[s]};
}

}  // namespace

void CpuBackend::conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& conv_state,
                             const SequenceRows& seqs, const Tensor& out) {
  const int64_t channels = x.cols();
  const int64_t kernel = weight.cols();
  const int64_t keep = kernel - 1;
  const int64_t n_seqs = seqs.seq_slot.numel();
  // One task per (sequence, block of channels): channels are independent. Tasks go block by
  // block, each block's sequences together, so a thread's share holds some of every sequence:
  // a pass of one long fill chunk and one-row sequences keeps both threads on the chunk.
  const int64_t block = 64;
  const int64_t blocks = (channels + block - 1) / block;
  pool_.parallel_for(n_seqs * blocks, 1, [&](int64_t begin, int64_t end) {
    float window[64];
    for (int64_t task = begin; task < end; ++task) {
      SeqRange seq = seq_range(seqs, task % n_seqs);
      int64_t c0 = (task / n_seqs) * block, c1 = std::min(channels, c0 + block);
      float* state = conv_state.as<float>() + seq.slot * channels * keep;
      for (int64_t c = c0; c < c1; ++c) {
        float* history = state + c * keep;  // oldest first
        if (seq.start == 0) std::fill(history, history + keep, 0.0f);
        const float* w = weight.as<float>() + c * kernel;
        for (int64_t k = 0; k < keep; ++k) window[k] = history[k];
        for (int64_t r = seq.begin; r < seq.end; ++r) {
          window[keep] = x.as<float>()[r * channels + c];
          float acc = bias.data ? bias.as<float>()[c] : 0.0f;
          for (int64_t k = 0; k < kernel; ++k) acc += w[k] * window[k];
          out.as<float>()[r * channels + c] = silu(acc);
          for (int64_t k = 0; k < keep; ++k) window[k] = window[k + 1];
          if (int64_t slot = row_slot(seqs, r); slot >= 0)
            std::copy_n(window, keep, conv_state.as<float>() + (slot * channels + c) * keep);
        }
        for (int64_t k = 0; k < keep; ++k) history[k] = window[k];
      }
    }
  });
}

namespace {

struct HeadScan {
  const SsmScan* scan;
  int64_t heads, head_dim, state_size, group;  // group: the B/C group of this head
  int64_t head;
  float a, d, dt_bias;
};

// One row by the recurrence: h = exp(dt A) h + dt x B^T; y = h C + D x.
void scan_step(const HeadScan& h, int64_t row, float* state) {
  const SsmScan& s = *h.scan;
  const int64_t P = h.head_dim, N = h.state_size;
  float dt = std::max(softplus(s.dt.as<float>()[row * h.heads + h.head] + h.dt_bias), s.dt_min);
  float decay = std::exp(dt * h.a);
  const float* x = s.x.as<float>() + (row * h.heads + h.head) * P;
  const float* b = s.b.as<float>() + (row * s.b.shape[1] + h.group) * N;
  const float* c = s.c.as<float>() + (row * s.c.shape[1] + h.group) * N;
  float* y = s.out.as<float>() + (row * h.heads + h.head) * P;
  for (int64_t p = 0; p < P; ++p) {
    float* hp = state + p * N;
    float dx = dt * x[p];
    for (int64_t n = 0; n < N; ++n) hp[n] = hp[n] * decay + dx * b[n];
    y[p] = cpu::dot_fixed(hp, c, N) + h.d * x[p];
  }
}

// Rows [r0, r0 + len) by the SSD chunked form, from the state at the piece's start.
//   y_t = sum_{s<=t} exp(A (dt_{s+1} + .. + dt_t)) (C_t . B_s) dt_s x_s + exp(A (dt_0..dt_t)) C_t h + D x_t
//   h'  = exp(A sum dt) h + sum_s exp(A (dt_{s+1} + .. + dt_last)) dt_s x_s B_s^T
void scan_chunk(const HeadScan& h, int64_t r0, int64_t len, float* state, std::vector<float>& work) {
  const SsmScan& s = *h.scan;
  const int64_t P = h.head_dim, N = h.state_size;
  const int64_t groups = s.b.shape[1];
  work.resize(size_t(len * 3 + len * len));
  float* dt = work.data();             // [len]
  float* cum = dt + len;               // [len]: A * (dt_0 + .. + dt_t)
  float* to_end = cum + len;           // [len]: A * (dt_{t+1} + .. + dt_last)
  float* weight = to_end + len;        // [len, len]: exp(segment) * (C_t . B_s) * dt_s, s <= t
  float running = 0.0f;
  for (int64_t t = 0; t < len; ++t) {
    dt[t] = std::max(softplus(s.dt.as<float>()[(r0 + t) * h.heads + h.head] + h.dt_bias), s.dt_min);
    running += dt[t] * h.a;
    cum[t] = running;
  }
  float tail = 0.0f;
  for (int64_t t = len - 1; t >= 0; --t) {
    to_end[t] = tail;
    tail += dt[t] * h.a;
  }
  auto b_row = [&](int64_t t) { return s.b.as<float>() + ((r0 + t) * groups + h.group) * N; };
  auto c_row = [&](int64_t t) { return s.c.as<float>() + ((r0 + t) * groups + h.group) * N; };
  for (int64_t t = 0; t < len; ++t) {
    float segment = 0.0f;  // A * (dt_{s+1} + .. + dt_t), summed from t downwards
    for (int64_t s_ = t; s_ >= 0; --s_) {
      weight[t * len + s_] = std::exp(segment) * cpu::dot_fixed(c_row(t), b_row(s_), N) * dt[s_];
      segment += dt[s_] * h.a;
    }
  }
  for (int64_t t = 0; t < len; ++t) {
    const float* c = c_row(t);
    float carry = std::exp(cum[t]);
    float* y = s.out.as<float>() + ((r0 + t) * h.heads + h.head) * P;
    const float* xt = s.x.as<float>() + ((r0 + t) * h.heads + h.head) * P;
    for (int64_t p = 0; p < P; ++p) {
      float acc = 0.0f;
      for (int64_t s_ = 0; s_ <= t; ++s_) acc += weight[t * len + s_] * s.x.as<float>()[((r0 + s_) * h.heads + h.head) * P + p];
      y[p] = acc + carry * cpu::dot_fixed(state + p * N, c, N) + h.d * xt[p];
    }
  }
  float total = std::exp(cum[len - 1]);
  for (int64_t p = 0; p < P; ++p) {
    float* hp = state + p * N;
    for (int64_t n = 0; n < N; ++n) hp[n] *= total;
    for (int64_t s_ = 0; s_ < len; ++s_) {
      float coef = std::exp(to_end[s_]) * dt[s_] * s.x.as<float>()[((r0 + s_) * h.heads + h.head) * P + p];
      const float* b = b_row(s_);
      for (int64_t n = 0; n < N; ++n) hp[n] += coef * b[n];
    }
  }
}

}  // namespace

void CpuBackend::ssm_scan(const SsmScan& scan, const SequenceRows& seqs) {
  const int64_t heads = scan.x.shape[1];
  const int64_t head_dim = scan.x.shape[2];
  const int64_t groups = scan.b.shape[1];
  const int64_t state_size = scan.b.shape[2];
  const int64_t n_seqs = seqs.seq_slot.numel();
  // Tasks go head by head, each head's sequences together (as conv1d_silu's blocks).
  pool_.parallel_for(n_seqs * heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> work;
    for (int64_t task = begin; task < end; ++task) {
      SeqRange seq = seq_range(seqs, task % n_seqs);
      HeadScan h;
      h.scan = &scan;
      h.heads = heads;
      h.head_dim = head_dim;
      h.state_size = state_size;
      h.head = task / n_seqs;
      h.group = h.head / (heads / groups);
      h.a = -std::exp(scan.a_log.as<float>()[h.head]);
      h.d = scan.d.as<float>()[h.head];
      h.dt_bias = scan.dt_bias.as<float>()[h.head];
      float* state = scan.state.as<float>() + (seq.slot * heads + h.head) * head_dim * state_size;
      if (seq.start == 0) std::fill(state, state + head_dim * state_size, 0.0f);
      for (int64_t r = seq.begin; r < seq.end;) {
        int64_t position = seq.start + (r - seq.begin);
        int64_t cut = std::min(seq.end, r + (scan.chunk_size - position % scan.chunk_size));
        if (scan.recurrent) {
          for (; r < cut; ++r) {
            scan_step(h, r, state);
            if (int64_t slot = row_slot(seqs, r); slot >= 0)
              std::copy_n(state, head_dim * state_size,
                          scan.state.as<float>() + (slot * heads + h.head) * head_dim * state_size);
          }
          continue;
        }
        if (cut - r == 1) scan_step(h, r, state);
        else scan_chunk(h, r, cut - r, state, work);
        r = cut;
      }
    }
  });
}

void CpuBackend::gated_rms_norm(const Tensor& x, const Tensor& gate, const Tensor& weight, int64_t groups, float eps,
                                const Tensor& out) {
  const int64_t d = x.cols();
  const int64_t size = d / groups;
  pool_.parallel_for(x.rows(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x.as<float>() + r * d;
      const float* zr = gate.as<float>() + r * d;
      float* o = out.as<float>() + r * d;
      for (int64_t i = 0; i < d; ++i) o[i] = xr[i] * silu(zr[i]);
      for (int64_t g = 0; g < groups; ++g) {
        float* v = o + g * size;
        float inv = 1.0f / std::sqrt(cpu::sum_squares_fixed(v, size) / float(size) + eps);
        const float* w = weight.as<float>() + g * size;
        for (int64_t i = 0; i < size; ++i) v[i] = w[i] * (v[i] * inv);
      }
    }
  });
}

}  // namespace lockstep
