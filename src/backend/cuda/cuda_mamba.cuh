// Shared by the CUDA Mamba2 kernels (cuda_mamba.cu, cuda_ssd.cu): a pass's sequences, the
// scan's arguments, and one row of the recurrence as one warp runs it. The round kernel and
// the SSD kernel's one-row pieces both call scan_row, so a one-row piece gives the same bits
// whichever kernel runs it.
#pragma once

#include "backend/cuda/cuda_launches.cuh"

namespace lockstep::cuda {

struct Seqs {
  const int32_t* begin;
  const int32_t* start;
  const int32_t* slot;
  const int32_t* row_slot;  // null, or [n_rows]: the slot that also takes the state after each row
};

inline void key_add(LaunchKey& key, const Seqs& s) {
  static_assert(sizeof(Seqs) == 32, "key_add(Seqs) must list every field");
  key_add(key, s.begin), key_add(key, s.start), key_add(key, s.slot), key_add(key, s.row_slot);
}

inline Seqs seqs_of(const SequenceRows& seqs) {
  return {ptr<int32_t>(seqs.seq_begin), ptr<int32_t>(seqs.seq_start), ptr<int32_t>(seqs.seq_slot),
          seqs.row_slot.data ? ptr<int32_t>(seqs.row_slot) : nullptr};
}

// Columns of a head that one warp runs the recurrence for.
constexpr int kColsPerWarp = 8;

struct ScanArgs {
  const float *x, *dt, *b, *c, *a_log, *d, *dt_bias;
  float dt_min;
  float* state;
  float* out;
  int64_t heads, head_dim, groups, state_size;
};

inline void key_add(LaunchKey& key, const ScanArgs& a) {
  static_assert(sizeof(ScanArgs) == 112, "key_add(ScanArgs) must list every field");
  for (const float* p : {a.x, a.dt, a.b, a.c, a.a_log, a.d, a.dt_bias}) key_add(key, p);
  key_add(key, a.dt_min), key_add(key, a.state), key_add(key, a.out);
  key_add(key, a.heads), key_add(key, a.head_dim), key_add(key, a.groups), key_add(key, a.state_size);
}

// One row's inputs to one warp of the scan.
template <int kLaneStates>
struct ScanRow {
  float dt;  // before dt_bias and softplus
  float b[kLaneStates], c[kLaneStates];
  float x[kColsPerWarp];
};

// `warp` is the warp's place in the head: it runs columns [warp * kColsPerWarp, + kColsPerWarp).
template <int kLaneStates>
__device__ inline void load_scan_row(const ScanArgs& a, int64_t r, int64_t head, int64_t group, int warp, int lane,
                                     ScanRow<kLaneStates>& row) {
  const int64_t P = a.head_dim, N = a.state_size;
  row.dt = a.dt[r * a.heads + head];
#pragma unroll
  for (int e = 0; e < kLaneStates; ++e) {
    const int64_t n = lane + 32 * e;
    row.b[e] = n < N ? a.b[(r * a.groups + group) * N + n] : 0.0f;
    row.c[e] = n < N ? a.c[(r * a.groups + group) * N + n] : 0.0f;
  }
  const float* xr = a.x + (r * a.heads + head) * P;
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j) {
    const int64_t p = int64_t(warp) * kColsPerWarp + j;
    row.x[j] = p < P ? xr[p] : 0.0f;
  }
}

// A head's constants for the scan.
struct ScanHead {
  float a, d, dt_bias;  // A = -exp(a_log)
};

__device__ inline ScanHead scan_head(const ScanArgs& a, int64_t head) {
  return {-expf(a.a_log[head]), a.d[head], a.dt_bias[head]};
}

// Row r by the recurrence for one warp's columns: h = exp(dt A) h + dt x B^T, y = h C + D x.
// Lane `lane` holds state entries n = lane + 32 e of each column in h; lane 0 writes y. Every
// product and sum is spelled out (fmaf), so the bits do not hang on the compiler's contractions
// in the kernel that inlines it.
template <int kLaneStates>
__device__ inline void scan_row(const ScanArgs& a, const ScanHead& k, const ScanRow<kLaneStates>& row, int64_t r,
                                int64_t head, int warp, int lane, float (&h)[kColsPerWarp][kLaneStates]) {
  const float dt = fmaxf(softplus(row.dt + k.dt_bias), a.dt_min);
  const float decay = expf(dt * k.a);
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j) {
    const int64_t p = int64_t(warp) * kColsPerWarp + j;
    const float dx = dt * row.x[j];
    float part = 0.0f;
#pragma unroll
    for (int e = 0; e < kLaneStates; ++e) {
      h[j][e] = fmaf(h[j][e], decay, dx * row.b[e]);
      part = fmaf(h[j][e], row.c[e], part);
    }
    const float y = fmaf(k.d, row.x[j], warp_sum(part));
    if (lane == 0 && p < a.head_dim) a.out[(r * a.heads + head) * a.head_dim + p] = y;
  }
}

// The SSD kernel (cuda_ssd.cu): every sequence of the pass, its rows cut at absolute multiples
// of `chunk` (1 to kMaxSsdChunk); one-row pieces by scan_row, longer ones by the SSD chunked form.
constexpr int64_t kMaxSsdChunk = 256;
void launch_ssd_scan(const ScanArgs& a, const Seqs& seqs, int64_t n_seqs, int64_t chunk, Launches& launches);

}  // namespace lockstep::cuda
