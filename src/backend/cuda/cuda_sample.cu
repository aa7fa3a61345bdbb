// Token sampling on the GPU, so a round sends back ids, not logits: the host Sampler's rule
// (sampling/sampler.h) with the same integer weights and draws, one block per logit row.
//
// The host Sampler orders candidates with partitions and selects; here each step is a radix
// select over a 64-bit rank key (the logit's order bits, then the complement of the id, so
// the larger key ranks first and ties go to the lower id). The keys are distinct and every sum
// is an exact integer, so the result does not depend on the order threads add in: candidate
// lists are compacted with atomics and the picked id is still a pure function of the row.
// Weights use the device's double exp(), which may differ from the host's in the last bit; a
// pick can differ from the host Sampler's only when a draw lands within a few units of 2^-52
// of a boundary.
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.cuh"
#include "base/philox.h"
#include "sampling/draw_math.h"

namespace lockstep {
namespace {

constexpr int kThreads = 1024;
constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;
using draw::WideSum;

// One row's settings, flattened for the device.
struct RowSettings {
  double temperature;
  uint64_t seed;
  int64_t position;
  uint32_t top_p_bits;
  float min_p;
  int32_t top_k;
  int32_t padding;  // the size stays a multiple of 8, so rows of these stay aligned
};

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
  int count;                       // compaction counter
  int digit;
  WideSum warp_sums[kBins / 32];   // find_digit: each warp's sum of its bins
  int first_reached;               // find_digit: the first bin, from the top, where the goal is reached
};

__device__ uint64_t rank_key(float logit, int32_t id) {
  uint32_t bits = logit == 0.0f ? 0u : __float_as_uint(logit);  // -0 ties with +0, as on the host
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return uint64_t(bits) << 32 | uint32_t(~uint32_t(id));
}

__device__ int32_t key_id(uint64_t key) { return int32_t(~uint32_t(key)); }

// sampler.h step 1: the weight of one logit (NaN and -inf weigh 0).
__device__ uint64_t weight_of(float logit, float max_logit, double temperature) {
  if (max_logit == INFINITY) return logit == INFINITY ? draw::kTopWeight : 0;
  if (!(logit > -INFINITY)) return 0;
  const double exponent = (double(logit) - double(max_logit)) / temperature;
  if (exponent < draw::kZeroWeightExponent) return 0;
  return uint64_t(exp(exponent) * 0x1p52);  // scaling by 2^52 is exact
}

// Appends `c` to `list` where `keep`, one shared atomic per warp. Every lane of the warp calls it.
__device__ void append(Candidate* list, int* count, bool keep, const Candidate& c) {
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
__device__ void bin_add(Shared& s, bool active, int digit, uint64_t high, uint64_t low) {
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
__device__ WideSum kept_sum(Shared& s, const Candidate* all, int n, uint64_t floor_key) {
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

__device__ WideSum shuffle_up(WideSum v, int offset) {
  const uint64_t high = __shfl_up_sync(0xffffffffu, uint64_t(v >> 64), offset);
  const uint64_t low = __shfl_up_sync(0xffffffffu, uint64_t(v), offset);
  return (WideSum(high) << 64) | low;
}

// The digit where the running sum of the bins, from the top bin down and after s.before,
// first reaches goal (digit 0 if none does), into s.digit, and s.before += the bins above it.
// Thread t < kBins holds bin kBins - 1 - t: a prefix sum over the block's first warps in place
// of one thread walking the bins. The sums are exact integers, so the digit is the walk's.
__device__ void find_digit(Shared& s, WideSum goal) {
  const int t = int(threadIdx.x), lane = t % 32, warp = t / 32;
  WideSum bin = 0, inclusive = 0;
  if (t < kBins) {
    const int d = kBins - 1 - t;
    bin = (WideSum(s.high[d]) << 32) + s.low[d];
    inclusive = bin;
    for (int offset = 1; offset < 32; offset <<= 1) {
      const WideSum other = shuffle_up(inclusive, offset);
      if (lane >= offset) inclusive += other;
    }
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
__device__ Picked select(Shared& s, const Candidate* all, int n, uint64_t floor_key, WideSum goal, bool by_count,
                         Candidate* work_a, Candidate* work_b) {
  const Candidate* from = all;
  Candidate* to = work_a;
  if (threadIdx.x == 0) s.before = 0;
  for (int shift = 64 - kDigitBits; shift >= 0; shift -= kDigitBits) {
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
__device__ uint64_t smallest_key(Shared& s, const Candidate* list, int n, uint64_t floor_key, double min_weight) {
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

__device__ unsigned long long warp_max_key(unsigned long long v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The argmax, split over kBestParts blocks per row: best[row][part] = the best key of the part's
// logits above -inf (NaN fails the test), 0 if none. A max of distinct keys does not depend on
// how the row is cut.
constexpr int kBestParts = 32;
constexpr int kBestThreads = 256;

__global__ void best_key_kernel(const float* logits, int64_t vocab, unsigned long long* best_keys) {
  cuda::start_kernel();
  __shared__ unsigned long long warp_best[kBestThreads / 32];
  const float* x = logits + int64_t(blockIdx.y) * vocab;
  const int64_t part = (vocab + kBestParts - 1) / kBestParts;
  const int64_t begin = int64_t(blockIdx.x) * part, end = cuda::min64(vocab, begin + part);
  unsigned long long best = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kBestThreads)
    if (x[i] > -INFINITY) best = max(best, (unsigned long long)rank_key(x[i], int32_t(i)));
  best = warp_max_key(best);
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kBestThreads / 32; ++w) best = max(best, warp_best[w]);
    best_keys[int64_t(blockIdx.y) * kBestParts + blockIdx.x] = best;
  }
}

// One block per row, after best_key_kernel. lists: 3 * vocab candidates per row (all, and the
// two work lists); only rows that sample (temperature > 0) touch them, so a greedy-only launch
// may pass none.
__global__ void sample_kernel(const float* logits, int64_t vocab, const RowSettings* settings,
                              const unsigned long long* best_keys, Candidate* lists, int32_t* ids) {
  cuda::start_kernel();
  __shared__ Shared s;
  const float* x = logits + int64_t(blockIdx.x) * vocab;
  const RowSettings row = settings ? settings[blockIdx.x] : RowSettings{};  // none: greedy (argmax)

  unsigned long long best = 0;
  for (int part = 0; part < kBestParts; ++part) best = max(best, best_keys[int64_t(blockIdx.x) * kBestParts + part]);
  if (best == 0 || row.temperature == 0.0) {  // greedy, or every logit NaN or -inf: token 0
    if (threadIdx.x == 0) ids[blockIdx.x] = best == 0 ? 0 : key_id(best);
    return;
  }

  // Step 1: the candidates, the tokens of nonzero weight, in any order.
  Candidate* all = lists + int64_t(blockIdx.x) * 3 * vocab;
  Candidate* work_a = all + vocab;
  Candidate* work_b = work_a + vocab;
  const float max_logit = x[key_id(best)];
  if (threadIdx.x == 0) s.count = 0;
  __syncthreads();
  for (int64_t base = 0; base < vocab; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    const float logit = i < vocab ? x[i] : -INFINITY;
    const Candidate c{rank_key(logit, int32_t(i)), weight_of(logit, max_logit, row.temperature)};
    append(all, &s.count, c.weight != 0, c);
  }
  __syncthreads();
  const int n = s.count;

  // Step 3: each filter keeps a prefix of the rank order, the keys >= floor_key.
  uint64_t floor_key = 0;
  if (row.top_k > 0 && row.top_k < n)
    floor_key = select(s, all, n, 0, WideSum(row.top_k), true, work_a, work_b).key;
  WideSum total = kept_sum(s, all, n, floor_key);
  if (__uint_as_float(row.top_p_bits) < 1.0f) {
    const Picked picked = select(s, all, n, floor_key, draw::mass_threshold(row.top_p_bits, total), false, work_a,
                                 work_b);
    floor_key = picked.key;
    total = picked.prefix;
  }
  if (row.min_p > 0.0f) {
    // Weights fall along the order, so the keys of weight >= min_p * 2^52 are a prefix too.
    floor_key = smallest_key(s, all, n, floor_key, double(row.min_p) * 0x1p52);
    total = kept_sum(s, all, n, floor_key);
  }

  // Step 4: the first kept token whose prefix sum exceeds floor(r * total / 2^53).
  const auto r = uint64_t(uniform_at(row.seed, uint64_t(row.position), Sampler::kTokenStream) * 0x1p53);
  const Picked picked = select(s, all, n, floor_key, draw::scale_by_draw(r, total) + 1, false, work_a, work_b);
  if (threadIdx.x == 0) ids[blockIdx.x] = key_id(picked.key);
}

// token_logprobs: one block a row. The max, then the sum of exp(logit - max) in double, each
// thread over a fixed stride and the block's partials added in a fixed order; then `top`
// passes, each taking the best logit ranked after the last pass's pick (larger value, then
// lower id). Nothing depends on the other rows of the launch.
constexpr int kLogprobThreads = 256;

__device__ double block_sum_double(double v, double* partials) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  __syncthreads();
  if (threadIdx.x % 32 == 0) partials[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kLogprobThreads / 32; ++w) total += partials[w];
  return total;
}

// Whether (value, id) ranks before (best, best_id): larger value, then lower id.
__device__ inline bool ranks_before(float value, int32_t id, float best, int32_t best_id) {
  return best_id < 0 || value > best || (value == best && id < best_id);
}

__global__ void __launch_bounds__(kLogprobThreads)
    token_logprobs_kernel(const float* logits, int64_t vocab, const int32_t* ids, int64_t top, float* logprobs,
                          int32_t* top_ids) {
  cuda::start_kernel();
  __shared__ float reduce[kLogprobThreads / 32];
  __shared__ double partials[kLogprobThreads / 32];
  __shared__ float pick_value[kLogprobThreads / 32];
  __shared__ int32_t pick_id[kLogprobThreads / 32];
  const float* row = logits + int64_t(blockIdx.x) * vocab;
  float top_value = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += kLogprobThreads) top_value = fmaxf(top_value, row[i]);
  top_value = cuda::block_max<kLogprobThreads>(top_value, reduce);
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += kLogprobThreads) sum += exp(double(row[i]) - double(top_value));
  const double log_sum = double(top_value) + log(block_sum_double(sum, partials));
  float* out = logprobs + int64_t(blockIdx.x) * (1 + top);
  if (threadIdx.x == 0) out[0] = float(double(row[ids[blockIdx.x]]) - log_sum);
  float last = INFINITY;
  int32_t last_id = -1;
  for (int64_t j = 0; j < top; ++j) {
    float best = -INFINITY;
    int32_t best_id = -1;
    for (int64_t i = threadIdx.x; i < vocab; i += kLogprobThreads) {
      const float v = isnan(row[i]) ? -INFINITY : row[i];
      const bool after = v < last || (v == last && int32_t(i) > last_id);
      if (after && ranks_before(v, int32_t(i), best, best_id)) best = v, best_id = int32_t(i);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int32_t other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
      if (other_id >= 0 && ranks_before(other, other_id, best, best_id)) best = other, best_id = other_id;
    }
    __syncthreads();
    if (threadIdx.x % 32 == 0) pick_value[threadIdx.x / 32] = best, pick_id[threadIdx.x / 32] = best_id;
    __syncthreads();
    best = pick_value[0], best_id = pick_id[0];
    for (int w = 1; w < kLogprobThreads / 32; ++w)
      if (pick_id[w] >= 0 && ranks_before(pick_value[w], pick_id[w], best, best_id))
        best = pick_value[w], best_id = pick_id[w];
    if (threadIdx.x == 0) {
      out[1 + j] = best_id < 0 ? -INFINITY : float(double(best) - log_sum);
      top_ids[int64_t(blockIdx.x) * top + j] = best_id < 0 ? 0 : best_id;
    }
    last = best, last_id = best_id < 0 ? int32_t(vocab) : best_id;
  }
}

// One thread per edit: edited_logit (sampling/logit_edits.h), each product, quotient and sum
// rounded on its own as the host's are (no contraction into fused multiply-adds).
__global__ void edit_logits_kernel(float* logits, int64_t vocab, const LogitEdit* edits, int64_t n) {
  cuda::start_kernel();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const LogitEdit e = edits[i];
  float* logit = logits + int64_t(e.row) * vocab + e.token;
  float x = *logit;
  if (e.repetition != 1.0f && e.in_context) x = x > 0.0f ? __fdiv_rn(x, e.repetition) : __fmul_rn(x, e.repetition);
  x = __fsub_rn(x, __fmul_rn(e.presence, e.count > 0.0f ? 1.0f : 0.0f));
  x = __fsub_rn(x, __fmul_rn(e.frequency, e.count));
  *logit = __fadd_rn(x, e.bias);
}

// One thread per (token, masked row): a token whose bit is 0 gets -inf.
__global__ void mask_logits_kernel(float* logits, int64_t vocab, const int32_t* rows, const uint32_t* bits,
                                   int64_t words) {
  cuda::start_kernel();
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= vocab) return;
  const uint32_t word = bits[int64_t(blockIdx.y) * words + (t >> 5)];
  if (!((word >> (t & 31)) & 1)) logits[int64_t(rows[blockIdx.y]) * vocab + t] = -INFINITY;
}

}  // namespace

namespace cuda {

void mask_logits(Context& context, const Tensor& logits, const std::vector<int32_t>& rows,
                 const std::vector<uint32_t>& bits) {
  if (rows.empty()) return;
  const int64_t n = int64_t(rows.size()), vocab = logits.cols(), words = (vocab + 31) / 32;
  require(int64_t(bits.size()) == n * words, "mask_logits: one mask per row");
  Tensor staged;
  staged.dtype = DType::i32;
  staged.shape = {n + n * words};
  staged.data = context.scratch.sample.masks.get(context.launches, staged.bytes());
  std::vector<int32_t> host(size_t(n + n * words));
  std::copy(rows.begin(), rows.end(), host.begin());
  std::memcpy(host.data() + n, bits.data(), bits.size() * sizeof(uint32_t));
  context.upload(staged, host.data());
  const int32_t* device_rows = static_cast<const int32_t*>(staged.data);
  launch(mask_logits_kernel, dim3(unsigned(blocks_for(vocab, 256)), unsigned(n)), 256, 0, context.launches,
         ptr<float>(logits), vocab, device_rows, reinterpret_cast<const uint32_t*>(device_rows + n), words);
}

void edit_logits(Context& context, const Tensor& logits, const std::vector<LogitEdit>& edits) {
  if (edits.empty()) return;
  const int64_t n = int64_t(edits.size());
  Tensor staged;
  staged.dtype = DType::i32;
  staged.shape = {n * int64_t(sizeof(LogitEdit) / 4)};
  staged.data = context.scratch.sample.edits.get(context.launches, staged.bytes());
  context.upload(staged, edits.data());
  launch(edit_logits_kernel, blocks_for(n, 256), 256, 0, context.launches, ptr<float>(logits), logits.cols(),
         static_cast<const LogitEdit*>(staged.data), n);
}

void sample(Context& context, const Tensor& logits, const std::vector<SampleRow>& rows, const Tensor& ids) {
  const int64_t n = logits.rows(), vocab = logits.cols();
  require(int64_t(rows.size()) == n && ids.numel() >= n, "sample: one SampleRow and one id per logit row");
  if (n == 0) return;
  std::vector<RowSettings> host(static_cast<size_t>(n));
  bool any_sampled = false;  // greedy rows need no candidate lists
  for (int64_t r = 0; r < n; ++r) {
    any_sampled = any_sampled || rows[size_t(r)].params.temperature != 0.0f;
    const SamplingParams& p = rows[size_t(r)].params;
    uint32_t top_p_bits = 0;
    std::memcpy(&top_p_bits, &p.top_p, sizeof top_p_bits);
    host[size_t(r)] = {double(p.temperature), p.seed, rows[size_t(r)].position, top_p_bits, p.min_p, p.top_k, 0};
  }
  Tensor settings;
  settings.dtype = DType::i32;
  settings.shape = {int64_t(sizeof(RowSettings) / 4) * n};
  // The settings, then each row's best keys by part.
  auto* settings_at = static_cast<char*>(context.scratch.sample.settings.get(
      context.launches, settings.bytes() + size_t(n) * kBestParts * sizeof(unsigned long long)));
  settings.data = settings_at;
  auto* best_keys = reinterpret_cast<unsigned long long*>(settings_at + settings.bytes());
  context.upload(settings, host.data());
  auto* lists = any_sampled ? static_cast<Candidate*>(context.scratch.sample.lists.get(
                                  context.launches, size_t(n * 3 * vocab) * sizeof(Candidate)))
                            : nullptr;
  launch(best_key_kernel, dim3(kBestParts, unsigned(n)), kBestThreads, 0, context.launches, ptr<float>(logits), vocab,
         best_keys);
  launch(sample_kernel, unsigned(n), kThreads, 0, context.launches, ptr<float>(logits), vocab,
         static_cast<const RowSettings*>(settings.data), best_keys, lists, ptr<int32_t>(ids));
}

void argmax(Context& context, const Tensor& logits, const Tensor& ids) {
  const int64_t n = logits.rows(), vocab = logits.cols();
  require(ids.numel() >= n, "argmax: one id per logit row");
  if (n == 0) return;
  auto* best_keys = static_cast<unsigned long long*>(
      context.scratch.sample.best_keys.get(context.launches, size_t(n) * kBestParts * sizeof(unsigned long long)));
  launch(best_key_kernel, dim3(kBestParts, unsigned(n)), kBestThreads, 0, context.launches, ptr<float>(logits), vocab,
         best_keys);
  launch(sample_kernel, unsigned(n), kThreads, 0, context.launches, ptr<float>(logits), vocab,
         static_cast<const RowSettings*>(nullptr), static_cast<const unsigned long long*>(best_keys),
         static_cast<Candidate*>(nullptr), ptr<int32_t>(ids));
}

void token_logprobs(Context& context, const Tensor& logits, const Tensor& ids, const Tensor& logprobs,
                    const Tensor& top_ids) {
  const int64_t n = logits.rows();
  if (n == 0) return;
  launch(token_logprobs_kernel, unsigned(n), kLogprobThreads, 0, context.launches, ptr<float>(logits), logits.cols(),
         ptr<int32_t>(ids), top_ids.cols(), ptr<float>(logprobs), ptr<int32_t>(top_ids));
}

}  // namespace cuda
}  // namespace lockstep
