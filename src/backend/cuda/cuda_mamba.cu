// CUDA Mamba2 ops: the causal conv with its state, the selective scan and the gated grouped
// RMSNorm. Each sequence's rows run in position order with that sequence's own state.
//
// The scan: a round (one row a sequence) runs the recurrence h = exp(dt A) h + dt x B^T,
// y = h C + D x in one warp per (sequence, head, 8 of the head's columns), each lane holding
// 1/32 of the state of those columns in registers. A pass with longer sequences goes to the SSD
// kernel (cuda_ssd.cu), which cuts them at absolute multiples of the chunk size as the CPU
// does and runs one-row pieces by the same scan_row, so a sequence's bits depend on its rows
// and the cuts alone.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_mamba.cuh"
#include "backend/cuda/cuda_ops.cuh"

namespace lockstep {

using cuda::kColsPerWarp;
using cuda::ptr;
using cuda::ScanArgs;
using cuda::Seqs;
using cuda::seqs_of;

namespace {

constexpr int kMaxConvKernel = 8;

// Rounds: one thread per (sequence, channel) runs the sequence's rows in order.
__global__ void conv1d_silu_kernel(const float* x, const float* weight, const float* bias, float* conv_state, Seqs seqs,
                                   int64_t n_seqs, int64_t channels, int kernel, float* out, cuda::ColumnSplit split) {
  cuda::start_kernel();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_seqs * channels) return;
  const int64_t s = i / channels, c = i % channels;
  const int keep = kernel - 1;
  float* history = conv_state + (int64_t(seqs.slot[s]) * channels + c) * keep;  // oldest first
  float window[kMaxConvKernel];
  for (int j = 0; j < keep; ++j) window[j] = seqs.start[s] == 0 ? 0.0f : history[j];
  const float* w = weight + c * kernel;
  const float b = bias ? bias[c] : 0.0f;
  for (int64_t r = seqs.begin[s]; r < seqs.begin[s + 1]; ++r) {
    window[keep] = x[r * channels + c];
    float acc = b;
    for (int j = 0; j < kernel; ++j) acc = fmaf(w[j], window[j], acc);
    cuda::store_column(out, split, r, c, channels, cuda::silu(acc));
    for (int j = 0; j < keep; ++j) window[j] = window[j + 1];
    if (seqs.row_slot && seqs.row_slot[r] >= 0) {
      float* copy = conv_state + (int64_t(seqs.row_slot[r]) * channels + c) * keep;
      for (int j = 0; j < keep; ++j) copy[j] = window[j];
    }
  }
  for (int j = 0; j < keep; ++j) history[j] = window[j];
}

// The sequence of row r: the last whose first row is at or before r.
__device__ inline int64_t sequence_of_row(const Seqs& seqs, int64_t n_seqs, int64_t r) {
  int64_t s = 0;
  for (int64_t lo = 0, hi = n_seqs - 1; lo <= hi;) {
    const int64_t mid = (lo + hi) / 2;
    if (seqs.begin[mid] <= r) s = mid, lo = mid + 1;
    else hi = mid - 1;
  }
  return s;
}

// The input of sequence s, channel c at offset `at` of this launch's rows; before its first row
// (at < 0), from the saved history (oldest first), or zero for a fresh sequence.
__device__ inline float conv_input(const float* x, const float* history, const Seqs& seqs, int64_t s, int64_t at,
                                   int64_t channels, int64_t c, int keep) {
  if (at >= 0) return x[(seqs.begin[s] + at) * channels + c];
  return seqs.start[s] == 0 ? 0.0f : history[keep + at];
}

// Fills: one thread per (row, channel). Row r at offset i of its sequence convolves the inputs
// at offsets i - K + 1 .. i, taken from earlier rows of this launch or, before the sequence's
// first row, from its saved history: the same values, in the same order, as the kernel above.
__global__ void conv1d_silu_rows_kernel(const float* x, const float* weight, const float* bias,
                                        const float* conv_state, Seqs seqs, int64_t n_seqs, int64_t n_rows,
                                        int64_t channels, int kernel, float* out, cuda::ColumnSplit split) {
  cuda::start_kernel();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_rows * channels) return;
  const int64_t r = i / channels, c = i % channels;
  const int64_t s = sequence_of_row(seqs, n_seqs, r);
  const int keep = kernel - 1;
  const int64_t offset = r - seqs.begin[s];
  const float* history = conv_state + (int64_t(seqs.slot[s]) * channels + c) * keep;
  const float* w = weight + c * kernel;
  float acc = bias ? bias[c] : 0.0f;
  for (int j = 0; j < kernel; ++j) {
    acc = fmaf(w[j], conv_input(x, history, seqs, s, offset - keep + j, channels, c, keep), acc);
  }
  cuda::store_column(out, split, r, c, channels, cuda::silu(acc));
}

// After conv1d_silu_rows_kernel, before the histories change: a row with a row slot leaves there
// the history after it, the K - 1 inputs up to its own.
__global__ void conv1d_row_history_kernel(const float* x, float* conv_state, Seqs seqs, int64_t n_seqs,
                                          int64_t n_rows, int64_t channels, int kernel) {
  cuda::start_kernel();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_rows * channels) return;
  const int64_t r = i / channels, c = i % channels;
  if (seqs.row_slot[r] < 0) return;
  const int64_t s = sequence_of_row(seqs, n_seqs, r);
  const int keep = kernel - 1;
  const int64_t offset = r - seqs.begin[s];
  const float* history = conv_state + (int64_t(seqs.slot[s]) * channels + c) * keep;
  float* copy = conv_state + (int64_t(seqs.row_slot[r]) * channels + c) * keep;
  for (int j = 0; j < keep; ++j) copy[j] = conv_input(x, history, seqs, s, offset + 1 - keep + j, channels, c, keep);
}

// After conv1d_silu_rows_kernel: each sequence's history becomes its last K - 1 inputs.
__global__ void conv1d_history_kernel(const float* x, float* conv_state, Seqs seqs, int64_t n_seqs, int64_t channels,
                                      int kernel) {
  cuda::start_kernel();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_seqs * channels) return;
  const int64_t s = i / channels, c = i % channels;
  const int keep = kernel - 1;
  const int64_t length = seqs.begin[s + 1] - seqs.begin[s];
  float* history = conv_state + (int64_t(seqs.slot[s]) * channels + c) * keep;
  float window[kMaxConvKernel];
  for (int j = 0; j < keep; ++j) window[j] = conv_input(x, history, seqs, s, length - keep + j, channels, c, keep);
  for (int j = 0; j < keep; ++j) history[j] = window[j];
}

// One warp's part of a head's state [P, N], into registers (zeros for a fresh sequence) and back.
template <int kLaneStates>
__device__ inline void load_state(const float* state, bool fresh, float (&h)[kColsPerWarp][kLaneStates], int warp,
                                  int lane, int64_t P, int64_t N) {
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j) {
    const int64_t p = int64_t(warp) * kColsPerWarp + j;
#pragma unroll
    for (int e = 0; e < kLaneStates; ++e) {
      const int64_t n = lane + 32 * e;
      h[j][e] = (fresh || p >= P || n >= N) ? 0.0f : state[p * N + n];
    }
  }
}

template <int kLaneStates>
__device__ inline void store_state(float* state, const float (&h)[kColsPerWarp][kLaneStates], int warp, int lane,
                                   int64_t P, int64_t N) {
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j) {
    const int64_t p = int64_t(warp) * kColsPerWarp + j;
#pragma unroll
    for (int e = 0; e < kLaneStates; ++e) {
      const int64_t n = lane + 32 * e;
      if (p < P && n < N) state[p * N + n] = h[j][e];
    }
  }
}

// Rounds. kLaneStates: state entries per lane (state_size / 32, rounded up). One warp per
// block, one block per (sequence, head, 8 of the head's columns): a column's recurrence and its
// sum over the state never leave the warp, so how the columns are spread over blocks changes
// nothing. The next row's inputs load while this row is computed.
template <int kLaneStates>
__global__ void ssm_scan_kernel(ScanArgs a, Seqs seqs, int warps_per_head) {
  cuda::start_kernel();
  const int warp = int(blockIdx.x % unsigned(warps_per_head)), lane = threadIdx.x % 32;
  const int64_t unit = blockIdx.x / unsigned(warps_per_head);
  const int64_t s = unit / a.heads, head = unit % a.heads;
  const int64_t group = head / (a.heads / a.groups);
  const int64_t P = a.head_dim, N = a.state_size;
  const cuda::ScanHead k = cuda::scan_head(a, head);
  float* state = a.state + (int64_t(seqs.slot[s]) * a.heads + head) * P * N;
  float h[kColsPerWarp][kLaneStates];
  load_state(state, seqs.start[s] == 0, h, warp, lane, P, N);
  const int64_t begin = seqs.begin[s], end = seqs.begin[s + 1];
  cuda::ScanRow<kLaneStates> row, next;
  if (begin < end) load_scan_row(a, begin, head, group, warp, lane, row);
  for (int64_t r = begin; r < end; ++r) {
    if (r + 1 < end) load_scan_row(a, r + 1, head, group, warp, lane, next);
    cuda::scan_row(a, k, row, r, head, warp, lane, h);
    row = next;
    if (seqs.row_slot && seqs.row_slot[r] >= 0)
      store_state(a.state + (int64_t(seqs.row_slot[r]) * a.heads + head) * P * N, h, warp, lane, P, N);
  }
  store_state(state, h, warp, lane, P, N);
}

constexpr int kNormThreads = 256;
// Groups of up to kNormHeld * kNormThreads values stay in registers between the sum and the
// scaling; larger ones are read again.
constexpr int kNormHeld = 4;

// One block per (row, group): out = weight * rms_norm_per_group(x * silu(gate)). The norm
// weights are the model's, which no kernel writes, so they are loaded before the wait.
__global__ void gated_rms_norm_kernel(const float* x, const float* gate, const float* weight, int64_t d, int64_t groups,
                                      float eps, float* out) {
  cuda::allow_early_launch();
  __shared__ float reduce[kNormThreads / 32];
  const int64_t r = blockIdx.x / groups, g = blockIdx.x % groups, size = d / groups;
  const int64_t base = r * d + g * size;
  const bool held = size <= int64_t(kNormHeld) * kNormThreads;
  float w[kNormHeld], value[kNormHeld];
#pragma unroll
  for (int j = 0; j < kNormHeld; ++j) {
    const int64_t i = threadIdx.x + int64_t(j) * kNormThreads;
    w[j] = held && i < size ? weight[g * size + i] : 0.0f;
  }
  cuda::wait_for_inputs();
  float sum = 0.0f;
  if (held) {
#pragma unroll
    for (int j = 0; j < kNormHeld; ++j) {
      const int64_t i = threadIdx.x + int64_t(j) * kNormThreads;
      if (i < size) value[j] = x[base + i] * cuda::silu(gate[base + i]), sum = fmaf(value[j], value[j], sum);
    }
  } else {
    for (int64_t i = threadIdx.x; i < size; i += kNormThreads) {
      const float v = x[base + i] * cuda::silu(gate[base + i]);
      out[base + i] = v;
      sum = fmaf(v, v, sum);
    }
  }
  const float inv = 1.0f / sqrtf(cuda::block_sum<kNormThreads>(sum, reduce) / float(size) + eps);
  if (held) {
#pragma unroll
    for (int j = 0; j < kNormHeld; ++j) {
      const int64_t i = threadIdx.x + int64_t(j) * kNormThreads;
      if (i < size) out[base + i] = w[j] * (value[j] * inv);
    }
  } else {
    for (int64_t i = threadIdx.x; i < size; i += kNormThreads)
      out[base + i] = weight[g * size + i] * (out[base + i] * inv);
  }
}

}  // namespace

namespace cuda {

void conv1d_silu(Context& context, const Tensor& x, const Tensor& weight, const Tensor& bias,
                 const Tensor& conv_state, const SequenceRows& seqs, const Tensor& out,
                 const std::vector<Tensor>& outs) {
  const int64_t n_seqs = seqs.seq_slot.numel(), channels = x.cols();
  const int kernel = int(weight.cols());
  require(kernel >= 1 && kernel <= kMaxConvKernel, "conv1d_silu: kernel width over 8");
  const ColumnSplit split = column_split(outs, channels, "conv1d_silu_split");
  if (n_seqs == 0) return;
  const int64_t n_rows = x.rows();
  const float* b = bias.data ? ptr<float>(bias) : nullptr;
  if (n_rows == n_seqs) {  // a row per sequence (rounds): one thread per (sequence, channel) does all
    launch(conv1d_silu_kernel, blocks_for(n_seqs * channels, 128), 128, 0, context.launches, ptr<float>(x),
           ptr<float>(weight), b, ptr<float>(conv_state), seqs_of(seqs), n_seqs, channels, kernel, ptr<float>(out),
           split);
  } else {  // fills: every row at once, then the histories
    launch(conv1d_silu_rows_kernel, blocks_for(n_rows * channels, 256), 256, 0, context.launches, ptr<float>(x),
           ptr<float>(weight), b, ptr<float>(conv_state), seqs_of(seqs), n_seqs, n_rows, channels, kernel,
           ptr<float>(out), split);
    if (seqs.row_slot.data)
      launch(conv1d_row_history_kernel, blocks_for(n_rows * channels, 256), 256, 0, context.launches, ptr<float>(x),
             ptr<float>(conv_state), seqs_of(seqs), n_seqs, n_rows, channels, kernel);
    launch(conv1d_history_kernel, blocks_for(n_seqs * channels, 128), 128, 0, context.launches, ptr<float>(x),
           ptr<float>(conv_state), seqs_of(seqs), n_seqs, channels, kernel);
  }
}

void ssm_scan(Context& context, const SsmScan& scan, const SequenceRows& seqs) {
  const int64_t n_seqs = seqs.seq_slot.numel();
  ScanArgs a{ptr<float>(scan.x),     ptr<float>(scan.dt),  ptr<float>(scan.b),       ptr<float>(scan.c),
             ptr<float>(scan.a_log), ptr<float>(scan.d),   ptr<float>(scan.dt_bias), scan.dt_min,
             ptr<float>(scan.state), ptr<float>(scan.out), scan.x.shape[1],          scan.x.shape[2],
             scan.b.shape[1],        scan.b.shape[2]};
  require(a.head_dim <= 32 * kColsPerWarp && a.state_size <= 256, "ssm_scan: head_dim over 256 or state over 256");
  if (n_seqs == 0) return;
  const Seqs rows = seqs_of(seqs);
  // A pass's runs of rows are never empty, so as many rows as sequences is a round: one row
  // each, which the SSD kernel would also run by scan_row. Anything longer goes to it.
  // A recurrent pass (a verify window) runs the round kernel, which takes a sequence's rows one
  // after another by scan_row.
  if (scan.x.shape[0] != n_seqs && !scan.recurrent) {
    require(scan.chunk_size >= 1 && scan.chunk_size <= kMaxSsdChunk,
            "ssm_scan: the GPU's SSD kernel takes chunk sizes of 1 to 256");
    launch_ssd_scan(a, rows, n_seqs, scan.chunk_size, context.launches);
    return;
  }
  const int warps_per_head = int((a.head_dim + kColsPerWarp - 1) / kColsPerWarp);
  const unsigned blocks = unsigned(n_seqs * a.heads * warps_per_head);
  const int64_t lane_states = (a.state_size + 31) / 32;
  if (lane_states <= 1)
    launch(ssm_scan_kernel<1>, blocks, 32, 0, context.launches, a, rows, warps_per_head);
  else if (lane_states <= 2)
    launch(ssm_scan_kernel<2>, blocks, 32, 0, context.launches, a, rows, warps_per_head);
  else if (lane_states <= 4)
    launch(ssm_scan_kernel<4>, blocks, 32, 0, context.launches, a, rows, warps_per_head);
  else
    launch(ssm_scan_kernel<8>, blocks, 32, 0, context.launches, a, rows, warps_per_head);
}

void gated_rms_norm(Context& context, const Tensor& x, const Tensor& gate, const Tensor& weight, int64_t groups,
                    float eps, const Tensor& out) {
  if (x.rows() == 0) return;
  launch(gated_rms_norm_kernel, unsigned(x.rows() * groups), kNormThreads, 0, context.launches, ptr<float>(x),
         ptr<float>(gate), ptr<float>(weight), x.cols(), groups, eps, ptr<float>(out));
}

}  // namespace cuda
}  // namespace lockstep
