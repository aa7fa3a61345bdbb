// The one-block radix select of the CUDA sampler (cuda_sample.cu): candidate lists of (rank
// key, fixed-point weight), the block's shared state, and the selects over a list, by count or
// by weight, digit by digit from the top. The keys are distinct and every sum an exact integer,
// so each result is a pure function of the list's contents, not of their order or of the order
// threads add in. Blocks of kThreads threads; include from cuda_sample.cu only.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "sampling/draw_math.h"

namespace lockstep::cuda_select {

constexpr int kThreads = 1024;
constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;
using draw::WideSum;

struct Candidate {
  uint64_t key;
  uint64_t weight;  // fixed point, 2^52 for the top token
};

// Per-block shared state of the selects.
struct Shared {
  unsigned long long high[kBins];  // per digit: the sums of weight >> 32 (or counts)
  unsigned long long low[kBins];   // and of weight & 0xffffffff
  WideSum before;                  // the weight of the keys ranked above the chosen digit
  unsigned long long best;         // a block-wide max or min key
  unsigned long long top_key;      // select: the largest kept key
  int count;                       // compaction counter
  int digit;
  WideSum warp_sums[kThreads / 32];  // find_digit, find_bin: each warp's sum of its bins
  int first_reached;                 // find_digit, find_bin: the first bin where the goal is reached
  WideSum scan_before;               // find_bin: the sum of the bins above it
  unsigned long long count_sum, max_weight;  // floor_partials
  int last_bin;                      // min_p_bin
};

__device__ inline uint64_t rank_key(float logit, int32_t id) {
  uint32_t bits = logit == 0.0f ? 0u : __float_as_uint(logit);  // -0 ties with +0, as on the host
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return uint64_t(bits) << 32 | uint32_t(~uint32_t(id));
}

__device__ inline int32_t key_id(uint64_t key) { return int32_t(~uint32_t(key)); }

// rank_key's order bits back to the float's bits (a -0 logit comes back as +0, the same value).
__device__ inline uint32_t order_bits_to_float_bits(uint32_t bits) {
  return (bits & 0x80000000u) ? bits & 0x7fffffffu : ~bits;
}

// sampler.h step 1: the weight of one logit (NaN and -inf weigh 0).
__device__ inline uint64_t weight_of(float logit, float max_logit, double temperature) {
  if (max_logit == INFINITY) return logit == INFINITY ? draw::kTopWeight : 0;
  if (!(logit > -INFINITY)) return 0;
  const double exponent = (double(logit) - double(max_logit)) / temperature;
  if (exponent < draw::kZeroWeightExponent) return 0;
  return uint64_t(exp(exponent) * 0x1p52);  // scaling by 2^52 is exact
}

// Appends `c` to `list` where `keep`, one shared atomic per warp. Every lane of the warp calls it.
__device__ inline void append(Candidate* list, int* count, bool keep, const Candidate& c) {
  const unsigned lanes = __ballot_sync(0xffffffffu, keep);
  if (lanes == 0) return;
  const int lane = threadIdx.x % 32;
  const int leader = __ffs(lanes) - 1;
  int base = 0;
  if (lane == leader) base = atomicAdd(count, __popc(lanes));
  base = __shfl_sync(0xffffffffu, base, leader);
  if (keep) list[base + __popc(lanes & ((1u << lane) - 1))] = c;
}

// Adds (high, low) to bin `digit` for the lanes where `active`. Lanes sharing a bin add their
// warp sum once (the usual case: the candidates' top bits agree); after a few bins the rest
// add alone. Every lane of the warp calls it.
__device__ inline void bin_add(Shared& s, bool active, int digit, uint64_t high, uint64_t low) {
  unsigned pending = __ballot_sync(0xffffffffu, active);
  for (int round = 0; pending != 0 && round < 4; ++round) {
    const int bin = __shfl_sync(0xffffffffu, digit, __ffs(pending) - 1);
    const bool mine = active && digit == bin;
    uint64_t sum_high = mine ? high : 0, sum_low = mine ? low : 0;
    for (int offset = 16; offset > 0; offset >>= 1) {
      sum_high += __shfl_xor_sync(0xffffffffu, sum_high, offset);
      sum_low += __shfl_xor_sync(0xffffffffu, sum_low, offset);
    }
    if (int(threadIdx.x % 32) == __ffs(pending) - 1) {
      atomicAdd(&s.high[bin], (unsigned long long)sum_high);
      atomicAdd(&s.low[bin], (unsigned long long)sum_low);
    }
    pending &= ~__ballot_sync(0xffffffffu, mine);
    active = active && !mine;
  }
  if (active) {
    atomicAdd(&s.high[digit], (unsigned long long)high);
    atomicAdd(&s.low[digit], (unsigned long long)low);
  }
}

// The exact weight sum of the candidates with key >= floor_key. Every thread gets it.
__device__ inline WideSum kept_sum(Shared& s, const Candidate* all, int n, uint64_t floor_key) {
  if (threadIdx.x == 0) s.high[0] = s.low[0] = 0;
  __syncthreads();
  for (int base = 0; base < n; base += kThreads) {
    const int i = base + int(threadIdx.x);
    const bool in = i < n && all[i].key >= floor_key;
    const uint64_t w = in ? all[i].weight : 0;
    bin_add(s, in, 0, w >> 32, w & 0xffffffffu);
  }
  __syncthreads();
  const WideSum sum = (WideSum(s.high[0]) << 32) + s.low[0];
  __syncthreads();
  return sum;
}

__device__ inline WideSum shuffle_up(WideSum v, int offset) {
  const uint64_t high = __shfl_up_sync(0xffffffffu, uint64_t(v >> 64), offset);
  const uint64_t low = __shfl_up_sync(0xffffffffu, uint64_t(v), offset);
  return (WideSum(high) << 64) | low;
}

// The sum of v over this lane and the lanes below it. Every lane of the warp calls it.
__device__ inline WideSum warp_inclusive_sum(WideSum v) {
  const int lane = int(threadIdx.x % 32);
  for (int offset = 1; offset < 32; offset <<= 1) {
    const WideSum other = shuffle_up(v, offset);
    if (lane >= offset) v += other;
  }
  return v;
}

// The digit where the running sum of the bins, from the top bin down and after s.before,
// first reaches goal (digit 0 if none does), into s.digit, and s.before += the bins above it.
// Thread t < kBins holds bin kBins - 1 - t: a prefix sum over the block's first warps in place
// of one thread walking the bins. The sums are exact integers, so the digit is the walk's.
__device__ inline void find_digit(Shared& s, WideSum goal) {
  const int t = int(threadIdx.x), lane = t % 32, warp = t / 32;
  WideSum bin = 0, inclusive = 0;
  if (t < kBins) {
    const int d = kBins - 1 - t;
    bin = (WideSum(s.high[d]) << 32) + s.low[d];
    inclusive = warp_inclusive_sum(bin);
    if (lane == 31) s.warp_sums[warp] = inclusive;
  }
  if (t == 0) s.first_reached = kBins - 1;
  __syncthreads();
  const WideSum before = s.before;
  if (t < kBins) {
    for (int w = 0; w < warp; ++w) inclusive += s.warp_sums[w];
    if (before + inclusive >= goal) atomicMin(&s.first_reached, t);
  }
  __syncthreads();
  if (t == s.first_reached) {
    s.before = before + inclusive - bin;
    s.digit = kBins - 1 - t;
    s.count = 0;
  }
  __syncthreads();
}

struct Picked {
  uint64_t key;
  WideSum prefix;  // the weight (or count) of the kept keys >= key
};

// Among the candidates with key >= floor_key, the highest-ranked prefix whose weight sum (the
// count, by_count) reaches goal: returns its last key. Requires the kept sum >= goal > 0.
// Digit by digit from the top, each pass keeps the candidates of the digit where the running
// sum reaches goal, ping-ponging between work_a and work_b.
__device__ inline Picked select(Shared& s, const Candidate* all, int n, uint64_t floor_key, WideSum goal, bool by_count,
                         Candidate* work_a, Candidate* work_b) {
  const Candidate* from = all;
  Candidate* to = work_a;
  // The leading digits every kept key shares choose nothing (each such pass keeps them all and
  // adds nothing above): start at the first digit where the smallest and largest differ.
  if (threadIdx.x == 0) s.best = ~0ull, s.top_key = 0;
  __syncthreads();
  unsigned long long low = ~0ull, high = 0;
  for (int i = int(threadIdx.x); i < n; i += kThreads) {
    const unsigned long long key = all[i].key;
    if (key >= floor_key) low = min(low, key), high = max(high, key);
  }
  atomicMin(&s.best, low);
  atomicMax(&s.top_key, high);
  __syncthreads();
  const unsigned long long differ = s.best ^ s.top_key;
  const int first_shift = differ == 0 ? 0 : (63 - __clzll((long long)differ)) / kDigitBits * kDigitBits;
  if (threadIdx.x == 0) s.before = 0;
  for (int shift = first_shift; shift >= 0; shift -= kDigitBits) {
    for (int d = int(threadIdx.x); d < kBins; d += kThreads) s.high[d] = s.low[d] = 0;
    __syncthreads();
    for (int base = 0; base < n; base += kThreads) {
      const int i = base + int(threadIdx.x);
      const Candidate c = i < n ? from[i] : Candidate{0, 0};
      const bool in = i < n && c.key >= floor_key;
      bin_add(s, in, int(c.key >> shift) & (kBins - 1), by_count ? 0 : c.weight >> 32,
              by_count ? 1 : c.weight & 0xffffffffu);
    }
    __syncthreads();
    find_digit(s, goal);
    const int digit = s.digit;
    for (int base = 0; base < n; base += kThreads) {
      const int i = base + int(threadIdx.x);
      const Candidate c = i < n ? from[i] : Candidate{0, 0};
      append(to, &s.count, i < n && c.key >= floor_key && (int(c.key >> shift) & (kBins - 1)) == digit, c);
    }
    __syncthreads();
    n = s.count;
    from = to;
    to = to == work_a ? work_b : work_a;
    if (n == 1) break;  // the lower digits would keep it alone, adding nothing above it
  }
  // One key is left: the keys are distinct.
  const Candidate last = from[0];
  const Picked picked{last.key, s.before + (by_count ? 1 : last.weight)};
  __syncthreads();
  return picked;
}

// The smallest key of the candidates with key >= floor_key and weight >= min_weight (~0 when
// there is none): each thread its own, then one shared atomic each.
__device__ inline uint64_t smallest_key(Shared& s, const Candidate* list, int n, uint64_t floor_key, double min_weight) {
  if (threadIdx.x == 0) s.best = ~0ull;
  __syncthreads();
  unsigned long long mine = ~0ull;
  for (int i = int(threadIdx.x); i < n; i += kThreads) {
    const Candidate c = list[i];
    if (c.key >= floor_key && double(c.weight) >= min_weight) mine = min(mine, (unsigned long long)c.key);
  }
  atomicMin(&s.best, mine);
  __syncthreads();
  const uint64_t best = s.best;
  __syncthreads();
  return best;
}

__device__ inline unsigned long long warp_max_key(unsigned long long v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

}  // namespace lockstep::cuda_select
