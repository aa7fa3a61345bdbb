// The SSD chunked form of the Mamba2 scan, for passes with fills (rounds run the recurrence:
// cuda_mamba.cu). Each sequence's rows are cut at absolute multiples of the chunk size, as on
// the CPU; a piece of one row runs scan_row, a longer piece, from the state h at its start:
//   y_t = sum_{s<=t} exp(cum_t - cum_s) (C_t . B_s) dt_s x_s + exp(cum_t) C_t . h + D x_t
//   h'  = exp(cum_last) h + sum_s exp(cum_last - cum_s) dt_s x_s B_s^T
// with cum_t = A (dt_0 + .. + dt_t). One block per (sequence, head, 32 of the head's columns)
// walks the sequence's pieces in order, the state of its columns in shared memory. Every sum
// runs in a fixed order over a piece's own rows, so a sequence's bits depend on its rows and
// cuts alone, not on what else the pass holds or how the columns are spread over blocks.
#include "backend/cuda/cuda_mamba.cuh"

namespace lockstep::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kCols = 32;                     // a block's columns of the head: column p0 + lane
constexpr int kTile = 32;                     // rows of B or C held at once
constexpr int kRowsPerWarp = kTile / kWarps;  // a warp's rows of a tile: warp + kWarps * i

// A block's shared memory, in floats (each part a multiple of 4, so float4 reads line up), for
// chunks of up to `rows` rows (the chunk size rounded up to kTile) and kStates state entries
// (the state size rounded up to 32; the entries past it stay zero).
struct Layout {
  int64_t rows, ld;  // ld: a B or C row; 4 floats over kStates, so 8 lanes' float4 reads of 8
                     // rows fall in distinct banks
  int64_t state, x, dt, cum, to_end, weight, b, c, floats;
};

__host__ __device__ inline Layout layout_for(int64_t chunk, int64_t states) {
  Layout l{};
  l.rows = (chunk + kTile - 1) / kTile * kTile;
  l.ld = states + 4;
  l.state = 0;                         // [states][kCols]: h of the block's columns, transposed
  l.x = l.state + states * kCols;      // [rows][kCols]: the piece's x, zero past its end
  l.dt = l.x + l.rows * kCols;         // [rows]: dt after softplus, zero past the end
  l.cum = l.dt + l.rows;               // [rows]: A (dt_0 + .. + dt_t)
  l.to_end = l.cum + l.rows;           // [rows]: exp(cum_last - cum_s) dt_s
  l.weight = l.to_end + l.rows;        // [kTile][rows]: exp(cum_t - cum_s) (C_t . B_s) dt_s
  l.b = l.weight + kTile * l.rows;     // [kTile][ld]: rows of B
  l.c = l.b + kTile * l.ld;            // [kTile][ld]: rows of C
  l.floats = l.c + kTile * l.ld;
  return l;
}

// Rows [row0, row0 + count) of B or C (this head's group) into a tile, zeros past them. Each
// thread issues all its loads before its first store, so the tile costs one trip to memory.
template <int kStates>
__device__ inline void load_tile(const ScanArgs& a, const float* from, int64_t row0, int64_t count, int64_t group,
                                 int64_t ld, float* tile) {
  constexpr int kPerThread = kTile * kStates / kThreads;
  float v[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = threadIdx.x + k * kThreads, r = i / kStates, n = i % kStates;
    v[k] = (r < count && n < a.state_size) ? from[((row0 + r) * a.groups + group) * a.state_size + n] : 0.0f;
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = threadIdx.x + k * kThreads;
    tile[i / kStates * ld + i % kStates] = v[k];
  }
}

__device__ inline float dot4(float4 a, float4 b, float acc) {
  return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, acc))));
}

struct Block {
  int64_t head, group, p0;  // p0: the block's first column
  ScanHead k;
};

// A one-row piece by scan_row, in warps 0..3 (8 columns each), their state moved to
// registers in scan_row's layout and back.
template <int kLaneStates>
__device__ void one_row(const ScanArgs& a, const Block& blk, int64_t r, float* state) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp < kCols / kColsPerWarp) {
    const int head_warp = int(blk.p0 / kColsPerWarp) + warp;
    float h[kColsPerWarp][kLaneStates];
#pragma unroll
    for (int j = 0; j < kColsPerWarp; ++j)
#pragma unroll
      for (int e = 0; e < kLaneStates; ++e) h[j][e] = state[(lane + 32 * e) * kCols + warp * kColsPerWarp + j];
    ScanRow<kLaneStates> row;
    load_scan_row(a, r, blk.head, blk.group, head_warp, lane, row);
    scan_row(a, blk.k, row, r, blk.head, head_warp, lane, h);
#pragma unroll
    for (int j = 0; j < kColsPerWarp; ++j)
#pragma unroll
      for (int e = 0; e < kLaneStates; ++e) state[(lane + 32 * e) * kCols + warp * kColsPerWarp + j] = h[j][e];
  }
  __syncthreads();
}

// Rows [r0, r0 + len) by the SSD form (len >= 2): outputs from the state at the piece's start,
// then the state at its end.
template <int kLaneStates>
__device__ void piece(const ScanArgs& a, const Block& blk, const Layout& l, int64_t r0, int64_t len, float* shared) {
  constexpr int kStates = 32 * kLaneStates;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  float *state = shared + l.state, *xs = shared + l.x, *dt = shared + l.dt, *cum = shared + l.cum;
  float *to_end = shared + l.to_end, *weight = shared + l.weight, *b = shared + l.b, *c = shared + l.c;
  const int64_t P = a.head_dim, H = a.heads;
  for (int64_t t = tid; t < l.rows; t += kThreads)
    dt[t] = t < len ? fmaxf(softplus(a.dt[(r0 + t) * H + blk.head] + blk.k.dt_bias), a.dt_min) : 0.0f;
  constexpr int kBatch = 8;  // loads in flight per thread
  for (int64_t i0 = 0; i0 < l.rows * kCols; i0 += kBatch * kThreads) {
    float v[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int64_t i = i0 + tid + k * kThreads, t = i / kCols, p = blk.p0 + i % kCols;
      v[k] = (t < len && p < P) ? a.x[((r0 + t) * H + blk.head) * P + p] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k)
      if (i0 + tid + k * kThreads < l.rows * kCols) xs[i0 + tid + k * kThreads] = v[k];
  }
  __syncthreads();
  if (warp == 0) {  // cum by a warp scan, 32 rows at a time
    float carry = 0.0f;
    for (int64_t t0 = 0; t0 < len; t0 += 32) {
      float v = t0 + lane < len ? dt[t0 + lane] * blk.k.a : 0.0f;
      for (int offset = 1; offset < 32; offset *= 2) {
        const float up = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += up;
      }
      v += carry;
      if (t0 + lane < len) cum[t0 + lane] = v;
      carry = __shfl_sync(0xffffffffu, v, 31);
    }
  }
  __syncthreads();
  const float last = cum[len - 1];
  for (int64_t t = tid; t < len; t += kThreads) to_end[t] = expf(last - cum[t]) * dt[t];

  // Outputs, kTile rows at a time: warp w computes rows t0 + w + kWarps i, column p0 + lane.
  for (int64_t t0 = 0; t0 < len; t0 += kTile) {
    load_tile<kStates>(a, a.c, r0 + t0, min64(kTile, len - t0), blk.group, l.ld, c);
    for (int64_t s0 = 0; s0 <= t0; s0 += kTile) {
      load_tile<kStates>(a, a.b, r0 + s0, min64(kTile, len - s0), blk.group, l.ld, b);
      __syncthreads();
      float dots[kRowsPerWarp] = {};
      const float4* b_row = reinterpret_cast<const float4*>(b + lane * l.ld);
#pragma unroll 4
      for (int n4 = 0; n4 < kStates / 4; ++n4) {
        const float4 bv = b_row[n4];
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i)
          dots[i] = dot4(reinterpret_cast<const float4*>(c + (warp + kWarps * i) * l.ld)[n4], bv, dots[i]);
      }
      const int64_t s = s0 + lane;
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const int64_t ti = warp + kWarps * i, t = t0 + ti;
        weight[ti * l.rows + s] = (s <= t && t < len) ? expf(cum[t] - cum[s]) * dots[i] * dt[s] : 0.0f;
      }
      __syncthreads();  // b is loaded again; the weights are complete
    }
    // The warp's rows side by side (independent sums). A row's weights past its t are zero up
    // to the tile's end, so every row can run to the warp's last row's whole float4.
    const int64_t last_row = min64(t0 + warp + kWarps * (kRowsPerWarp - 1), len - 1);
    float acc[kRowsPerWarp] = {}, from_state[kRowsPerWarp] = {};
    for (int64_t s4 = 0; s4 <= last_row / 4; ++s4) {
      const float* x4 = xs + s4 * 4 * kCols + lane;
      const float4 xv = make_float4(x4[0], x4[kCols], x4[2 * kCols], x4[3 * kCols]);
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i)
        acc[i] = dot4(reinterpret_cast<const float4*>(weight + (warp + kWarps * i) * l.rows)[s4], xv, acc[i]);
    }
#pragma unroll 4
    for (int n4 = 0; n4 < kStates / 4; ++n4) {
      const float* h4 = state + n4 * 4 * kCols + lane;
      const float4 hv = make_float4(h4[0], h4[kCols], h4[2 * kCols], h4[3 * kCols]);
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i)
        from_state[i] = dot4(reinterpret_cast<const float4*>(c + (warp + kWarps * i) * l.ld)[n4], hv, from_state[i]);
    }
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int64_t t = t0 + warp + kWarps * i;
      if (t < len && blk.p0 + lane < P)
        a.out[((r0 + t) * H + blk.head) * P + blk.p0 + lane] =
            fmaf(blk.k.d, xs[t * kCols + lane], fmaf(expf(cum[t]), from_state[i], acc[i]));
    }
    __syncthreads();  // c is loaded again
  }

  // The state: warp w updates entries [w * kWarpStates, + kWarpStates) of column p0 + lane.
  constexpr int kWarpStates = kStates / kWarps;
  static_assert(kWarpStates % 4 == 0, "a warp's state entries are read as float4s");
  const int n0 = warp * kWarpStates;
  const float total = expf(last);
  float h[kWarpStates];
#pragma unroll
  for (int m = 0; m < kWarpStates; ++m) h[m] = total * state[(n0 + m) * kCols + lane];
  for (int64_t s0 = 0; s0 < len; s0 += kTile) {
    const int64_t count = min64(kTile, len - s0);
    load_tile<kStates>(a, a.b, r0 + s0, count, blk.group, l.ld, b);
    __syncthreads();
    for (int64_t s = 0; s < count; ++s) {
      const float coef = to_end[s0 + s] * xs[(s0 + s) * kCols + lane];
      const float4* b_row = reinterpret_cast<const float4*>(b + s * l.ld + n0);
#pragma unroll
      for (int m4 = 0; m4 < kWarpStates / 4; ++m4) {
        const float4 bv = b_row[m4];
        h[4 * m4] = fmaf(coef, bv.x, h[4 * m4]);
        h[4 * m4 + 1] = fmaf(coef, bv.y, h[4 * m4 + 1]);
        h[4 * m4 + 2] = fmaf(coef, bv.z, h[4 * m4 + 2]);
        h[4 * m4 + 3] = fmaf(coef, bv.w, h[4 * m4 + 3]);
      }
    }
    __syncthreads();  // b is loaded again
  }
#pragma unroll
  for (int m = 0; m < kWarpStates; ++m) state[(n0 + m) * kCols + lane] = h[m];
  __syncthreads();
}

// kLaneStates: the state size over 32, rounded up.
template <int kLaneStates>
__global__ void __launch_bounds__(kThreads) ssd_scan_kernel(ScanArgs a, Seqs seqs, int64_t chunk, int slices) {
  constexpr int kStates = 32 * kLaneStates;
  start_kernel();
  extern __shared__ float4 ssd_shared[];
  float* shared = reinterpret_cast<float*>(ssd_shared);
  const Layout l = layout_for(chunk, kStates);
  const int64_t unit = blockIdx.x / unsigned(slices), s = unit / a.heads;
  Block blk;
  blk.head = unit % a.heads;
  blk.group = blk.head / (a.heads / a.groups);
  blk.p0 = int64_t(blockIdx.x % unsigned(slices)) * kCols;
  blk.k = scan_head(a, blk.head);
  const int64_t P = a.head_dim, N = a.state_size;
  float* state = a.state + (int64_t(seqs.slot[s]) * a.heads + blk.head) * P * N;
  const bool fresh = seqs.start[s] == 0;
  for (int i = threadIdx.x; i < kStates * kCols; i += kThreads) {
    const int64_t n = i / kCols, p = blk.p0 + i % kCols;
    shared[l.state + i] = (fresh || p >= P || n >= N) ? 0.0f : state[p * N + n];
  }
  __syncthreads();
  const int64_t begin = seqs.begin[s], end = seqs.begin[s + 1];
  for (int64_t r = begin; r < end;) {
    const int64_t position = seqs.start[s] + (r - begin);
    const int64_t cut = min64(end, r + chunk - position % chunk);
    if (cut - r == 1)
      one_row<kLaneStates>(a, blk, r, shared + l.state);
    else
      piece<kLaneStates>(a, blk, l, r, cut - r, shared);
    r = cut;
  }
  for (int i = threadIdx.x; i < kStates * kCols; i += kThreads) {
    const int64_t n = i / kCols, p = blk.p0 + i % kCols;
    if (p < P && n < N) state[p * N + n] = shared[l.state + i];
  }
}

template <int kLaneStates>
void launch_with(const ScanArgs& a, const Seqs& seqs, int64_t n_seqs, int64_t chunk, Launches& launches) {
  static const bool opted_in = [] {
    const size_t most = size_t(layout_for(kMaxSsdChunk, 32 * kLaneStates).floats) * sizeof(float);
    LOCKSTEP_CUDA(cudaFuncSetAttribute(ssd_scan_kernel<kLaneStates>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       int(most)));
    return true;
  }();
  (void)opted_in;
  const int slices = int((a.head_dim + kCols - 1) / kCols);
  const size_t bytes = size_t(layout_for(chunk, 32 * kLaneStates).floats) * sizeof(float);
  launch(ssd_scan_kernel<kLaneStates>, unsigned(n_seqs * a.heads * slices), kThreads, bytes, launches, a, seqs, chunk,
         slices);
}

}  // namespace

void launch_ssd_scan(const ScanArgs& a, const Seqs& seqs, int64_t n_seqs, int64_t chunk, Launches& launches) {
  const int64_t lane_states = (a.state_size + 31) / 32;
  if (lane_states <= 1)
    launch_with<1>(a, seqs, n_seqs, chunk, launches);
  else if (lane_states <= 2)
    launch_with<2>(a, seqs, n_seqs, chunk, launches);
  else if (lane_states <= 4)
    launch_with<4>(a, seqs, n_seqs, chunk, launches);
  else
    launch_with<8>(a, seqs, n_seqs, chunk, launches);
}

}  // namespace lockstep::cuda
