// Token sampling on the GPU, so a round sends back ids, not logits: the host Sampler's rule
// (sampling/sampler.h) with the same integer weights and draws.
//
// The host Sampler orders candidates with partitions and selects; here each step is a radix
// select over a 64-bit rank key (the logit's order bits, then the complement of the id, so
// the larger key ranks first and ties go to the lower id). The keys are distinct and every sum
// is an exact integer, so the result does not depend on the order threads add in: candidate
// lists are compacted with atomics and the picked id is still a pure function of the row.
// Weights use the device's double exp(), which may differ from the host's in the last bit; a
// pick can differ from the host Sampler's only when a draw lands within a few units of 2^-52
// of a boundary.
//
// A sampled row is spread over many blocks rather than walked by one: the tokens of nonzero
// weight are binned by their distance below the top logit over the temperature, 1,024 bins
// spread over the row's range (a monotone function of the rank key, so each bin holds a run of
// the rank order), every block of the row adding its part's counts, weight sums and top logit
// to the row's bins (hist_kernel). Each
// step of the rule (top-k, top-p, min-p, the draw) then finds from the bins which one its
// boundary falls in (finish_kernel), has the blocks collect that bin's candidates
// (collect_kernel), and selects among those few as before. Every sum is exact, so the pick is
// the one-block select's.
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_select.cuh"
#include "base/philox.h"
#include "sampling/draw_math.h"

namespace lockstep {
namespace {

using namespace cuda_select;

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

// The argmax, split over kBestParts blocks per row: best[row][part] = the best key of the part's
// logits above -inf (NaN fails the test), 0 if none. A max of distinct keys does not depend on
// how the row is cut.
constexpr int kBestParts = 32;
constexpr int kBestThreads = 256;

// A sampled row's bins: the tokens of nonzero weight by (max - logit) / temperature, the bins
// spread evenly over the row's candidates (down to its lowest logit, or to
// -kZeroWeightExponent units below the top, where weights reach 0). Bin 0 holds the top.
constexpr int kHistBins = 1024;
static_assert(kHistBins == kThreads, "find_bin gives each thread of a block one bin");
static_assert(kHistBins % kBestParts == 0, "best_key_kernel's blocks clear the bins in equal shares");

struct HistBin {
  unsigned long long high, low;  // the sums of weight >> 32 and of weight & 0xffffffff
  unsigned count;                // the tokens
  unsigned top;                  // the order bits (rank_key >> 32) of the bin's largest logit
};

// Where a sampled row stands between finish_kernel's launches. The kept candidates are the keys
// >= floor_key: every bin above floor_bin whole and, in floor_bin, those of its collected list
// >= floor_key (floor_count, floor_weight and floor_max: their count, weight and largest weight).
// floor_bin -1: no floor yet, every candidate is kept.
enum Step : int { kTopK = 0, kTopP, kMinP, kDraw, kDone };
struct RowState {
  WideSum floor_weight;
  unsigned long long floor_key, floor_count, floor_max;
  int step, floor_bin;
  int list_bin;    // the bin whose candidates the row's list holds (-1: none)
  int list_count;  // how many (collect_kernel counts them in)
  int collect;     // 1: collect_kernel is to fill the list with list_bin's candidates
  int padding[3];
  float lows[kBestParts];  // each part's lowest logit above -inf (+inf if none): best_key_kernel's
};

// A row's bins: bin_of(logit) = (max - logit) * per_logit, the 1,024 bins spread over the
// row's candidates (down to its lowest logit, or to -kZeroWeightExponent temperatures below
// the top, where weights reach 0). The same arithmetic in every kernel, so the same bins.
struct BinScale {
  double max_logit;
  double per_logit;  // 0 when the top is +inf: every candidate is +inf, in bin 0
};

__device__ BinScale bin_scale(const RowState& state, float max_logit, double temperature) {
  if (max_logit == INFINITY) return {0.0, 0.0};
  float lowest = INFINITY;
  for (int part = 0; part < kBestParts; ++part) lowest = fminf(lowest, state.lows[part]);
  const double spread = fmin((double(max_logit) - double(lowest)) / temperature, -draw::kZeroWeightExponent);
  const double per_unit = spread > 0.0 ? double(kHistBins) / spread : 1.0;
  return {double(max_logit), per_unit / temperature};
}

// The bin of a token of nonzero weight: monotone in its logit, so in its rank key.
__device__ int bin_of(float logit, const BinScale& scale) {
  if (scale.per_logit == 0.0) return 0;
  const double scaled = (scale.max_logit - double(logit)) * scale.per_logit;
  return scaled >= double(kHistBins - 1) ? kHistBins - 1 : int(scaled);
}

// hist, states: a sampling launch's (null for argmax): block `part` of each row clears its share
// of the row's bins, and block 0 sets the row's state up.
__global__ void best_key_kernel(const float* logits, int64_t vocab, unsigned long long* best_keys, HistBin* hist,
                                RowState* states) {
  cuda::start_kernel();
  __shared__ unsigned long long warp_best[kBestThreads / 32];
  __shared__ float warp_low[kBestThreads / 32];
  const float* x = logits + int64_t(blockIdx.y) * vocab;
  if (hist) {
    constexpr int kShare = kHistBins / kBestParts;
    HistBin* bins = hist + int64_t(blockIdx.y) * kHistBins + blockIdx.x * kShare;
    for (int b = int(threadIdx.x); b < kShare; b += kBestThreads) bins[b] = HistBin{0, 0, 0, 0};
    if (blockIdx.x == 0 && threadIdx.x == 0) {  // (each block writes its own lows entry)
      RowState& state = states[blockIdx.y];
      state.floor_weight = 0, state.floor_key = state.floor_count = state.floor_max = 0;
      state.step = kTopK, state.floor_bin = -1, state.list_bin = -1, state.list_count = 0, state.collect = 0;
    }
  }
  const int64_t part = (vocab + kBestParts - 1) / kBestParts;
  const int64_t begin = int64_t(blockIdx.x) * part, end = cuda::min64(vocab, begin + part);
  unsigned long long best = 0;
  float low = INFINITY;
  for (int64_t i = begin + threadIdx.x; i < end; i += kBestThreads)
    if (x[i] > -INFINITY) best = max(best, (unsigned long long)rank_key(x[i], int32_t(i))), low = fminf(low, x[i]);
  best = warp_max_key(best);
  for (int offset = 16; offset > 0; offset >>= 1) low = fminf(low, __shfl_xor_sync(0xffffffffu, low, offset));
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best, warp_low[threadIdx.x / 32] = low;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kBestThreads / 32; ++w) best = max(best, warp_best[w]), low = fminf(low, warp_low[w]);
    best_keys[int64_t(blockIdx.y) * kBestParts + blockIdx.x] = best;
    if (states) states[blockIdx.y].lows[blockIdx.x] = low;
  }
}

__device__ unsigned long long row_best(const unsigned long long* best_keys, int64_t row) {
  unsigned long long best = 0;
  for (int part = 0; part < kBestParts; ++part) best = max(best, best_keys[row * kBestParts + part]);
  return best;
}

// The rows' greedy picks (argmax, and launches in which no row samples): token 0 when every
// logit is NaN or -inf.
__global__ void greedy_kernel(const unsigned long long* best_keys, int64_t n, int32_t* ids) {
  cuda::start_kernel();
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= n) return;
  const unsigned long long best = row_best(best_keys, row);
  ids[row] = best == 0 ? 0 : key_id(best);
}

// The part of a row that block (part, row) of a launch of `parts` blocks a row reads.
__device__ void part_range(int64_t vocab, int parts, int64_t& begin, int64_t& end) {
  const int64_t size = (vocab + parts - 1) / parts;
  begin = int64_t(blockIdx.x) * size, end = cuda::min64(vocab, begin + size);
}

constexpr int kPartThreads = 256;

// The most bytes of candidate lists a sample call holds at once (about 42 rows of a
// 131,072-token vocabulary): wider calls take their sampled steps in chunks of rows.
constexpr int64_t kListBytes = int64_t(256) << 20;

// sampler.h step 1 over a part of a sampled row: each token of nonzero weight into the row's
// bins (block-wide sums in shared memory, then one global atomic each per bin the part touches).
__global__ void __launch_bounds__(kPartThreads)
    hist_kernel(const float* logits, int64_t vocab, int parts, const RowSettings* settings,
                const unsigned long long* best_keys, const RowState* states, HistBin* hist) {
  cuda::start_kernel();
  __shared__ HistBin bins[kHistBins];
  const int64_t row = blockIdx.y;
  const double temperature = settings[row].temperature;
  const unsigned long long best = row_best(best_keys, row);
  if (best == 0 || temperature == 0.0) return;  // the whole block leaves together
  for (int b = int(threadIdx.x); b < kHistBins; b += kPartThreads) bins[b] = HistBin{0, 0, 0, 0};
  __syncthreads();
  const float* x = logits + row * vocab;
  const float max_logit = x[key_id(best)];
  const BinScale scale = bin_scale(states[row], max_logit, temperature);
  int64_t begin, end;
  part_range(vocab, parts, begin, end);
  for (int64_t i = begin + threadIdx.x; i < end; i += kPartThreads) {
    const float logit = x[i];
    const uint64_t w = weight_of(logit, max_logit, temperature);
    if (w == 0) continue;
    HistBin& bin = bins[bin_of(logit, scale)];
    atomicAdd(&bin.count, 1u);
    atomicMax(&bin.top, unsigned(rank_key(logit, 0) >> 32));
    atomicAdd(&bin.high, (unsigned long long)(w >> 32));
    atomicAdd(&bin.low, (unsigned long long)(w & 0xffffffffu));
  }
  __syncthreads();
  HistBin* out = hist + row * kHistBins;
  for (int b = int(threadIdx.x); b < kHistBins; b += kPartThreads) {
    const HistBin mine = bins[b];
    if (mine.count == 0) continue;
    atomicAdd(&out[b].count, mine.count);
    atomicMax(&out[b].top, mine.top);
    atomicAdd(&out[b].high, mine.high);
    atomicAdd(&out[b].low, mine.low);
  }
}

// Where finish_kernel asked for it, the candidates of the row's list_bin from this block's part,
// appended to the row's list (in any order: the selects go by key).
__global__ void __launch_bounds__(kPartThreads)
    collect_kernel(const float* logits, int64_t vocab, int parts, const RowSettings* settings,
                   const unsigned long long* best_keys, RowState* states, Candidate* lists) {
  cuda::start_kernel();
  const int64_t row = blockIdx.y;
  RowState* state = states + row;
  const double temperature = settings[row].temperature;
  const unsigned long long best = row_best(best_keys, row);
  if (best == 0 || temperature == 0.0 || state->step == kDone || !state->collect) return;
  const int want = state->list_bin;
  const float* x = logits + row * vocab;
  const float max_logit = x[key_id(best)];
  const BinScale scale = bin_scale(*state, max_logit, temperature);
  Candidate* list = lists + row * 3 * vocab;
  int64_t begin, end;
  part_range(vocab, parts, begin, end);
  // Whole warps go round the loop together (append's ballot).
  for (int64_t base = begin; base < end; base += kPartThreads) {
    const int64_t i = base + threadIdx.x;
    const float logit = i < end ? x[i] : -INFINITY;
    const bool mine = i < end && logit > -INFINITY && bin_of(logit, scale) == want;  // (NaN fails)
    const uint64_t w = mine ? weight_of(logit, max_logit, temperature) : 0;
    const bool in = w != 0;
    append(list, &state->list_count, in, Candidate{rank_key(logit, int32_t(i)), w});
  }
}

__device__ WideSum bin_value(const HistBin& bin, bool by_count) {
  return by_count ? WideSum(bin.count) : (WideSum(bin.high) << 32) + bin.low;
}

// The kept part of bin b (by count or weight): whole above the floor's bin, the floor's
// partials in it, nothing below.
__device__ WideSum kept_in_bin(const HistBin* bins, const RowState& state, int b, bool by_count) {
  if (state.floor_bin < 0 || b < state.floor_bin) return bin_value(bins[b], by_count);
  if (b == state.floor_bin) return by_count ? WideSum(state.floor_count) : state.floor_weight;
  return 0;
}

struct BinPick {
  int bin;
  WideSum before;  // the kept count or weight of the bins above it
};

// The first bin, from the top, where the running sum of the kept counts (weights) reaches goal.
// Requires the kept sum >= goal. Thread t holds bin t; every thread gets the answer.
__device__ BinPick find_bin(Shared& s, const HistBin* bins, const RowState& state, WideSum goal, bool by_count) {
  const int t = int(threadIdx.x), lane = t % 32, warp = t / 32;
  const WideSum mine = kept_in_bin(bins, state, t, by_count);
  WideSum inclusive = warp_inclusive_sum(mine);
  if (lane == 31) s.warp_sums[warp] = inclusive;
  if (t == 0) s.first_reached = kHistBins - 1;
  __syncthreads();
  for (int w = 0; w < warp; ++w) inclusive += s.warp_sums[w];
  if (inclusive >= goal) atomicMin(&s.first_reached, t);
  __syncthreads();
  if (t == s.first_reached) s.scan_before = inclusive - mine;
  __syncthreads();
  const BinPick pick{s.first_reached, s.scan_before};
  __syncthreads();
  return pick;
}

// The kept weight (or count) of the row: a sum of exact integers.
__device__ WideSum kept_total(Shared& s, const HistBin* bins, const RowState& state, bool by_count) {
  const WideSum mine = kept_in_bin(bins, state, int(threadIdx.x), by_count);
  if (threadIdx.x == 0) s.high[0] = s.low[0] = 0;
  __syncthreads();
  // (a bin's weight, below 2^70, as mine >> 32 and its low 32 bits: 1024 of each fit 64 bits)
  bin_add(s, true, 0, uint64_t(mine >> 32), uint64_t(mine & 0xffffffffu));
  __syncthreads();
  const WideSum total = (WideSum(s.high[0]) << 32) + s.low[0];
  __syncthreads();
  return total;
}

// The lowest-ranked bin at or above the floor's with a kept weight >= min_weight (min-p's
// floor lies in it).
__device__ int min_p_bin(Shared& s, const HistBin* bins, const RowState& state, double min_weight, float max_logit,
                         double temperature) {
  const int t = int(threadIdx.x);
  const bool kept = state.floor_bin < 0 || t < state.floor_bin;
  // A bin's largest weight is its top logit's (the bin's keys >= the floor, in the floor's).
  uint64_t top = 0;
  if (kept && bins[t].count > 0)
    top = weight_of(__uint_as_float(order_bits_to_float_bits(bins[t].top)), max_logit, temperature);
  else if (t == state.floor_bin)
    top = state.floor_max;
  const bool has = double(top) >= min_weight && top != 0;
  if (t == 0) s.last_bin = 0;
  __syncthreads();
  if (has) atomicMax(&s.last_bin, t);
  __syncthreads();
  const int bin = s.last_bin;
  __syncthreads();
  return bin;
}

// The floor moves to `key` in `bin`, whose candidates the list holds: their partials.
__device__ void set_floor(Shared& s, RowState& state, const Candidate* list, int n, uint64_t key, int bin) {
  const WideSum weight = kept_sum(s, list, n, key);
  if (threadIdx.x == 0) s.count_sum = 0, s.max_weight = 0;
  __syncthreads();
  unsigned long long count = 0, top = 0;
  for (int i = int(threadIdx.x); i < n; i += kThreads)
    if (list[i].key >= key) ++count, top = max(top, (unsigned long long)list[i].weight);
  atomicAdd(&s.count_sum, count);
  atomicMax(&s.max_weight, top);
  __syncthreads();
  if (threadIdx.x == 0) {
    state.floor_key = key, state.floor_bin = bin, state.floor_weight = weight;
    state.floor_count = s.count_sum, state.floor_max = s.max_weight;
  }
  __syncthreads();
}

// One block per row, launched once after hist_kernel and once after each collect_kernel: takes
// the row's steps (sampler.h step 3's filters, then step 4's draw) as far as the candidates of
// the bins already collected allow, asks for the next bin's where a step needs another, and
// writes the id once the draw is made. Greedy rows write their argmax.
__global__ void __launch_bounds__(kThreads)
    finish_kernel(const float* logits, int64_t vocab, const RowSettings* settings,
                  const unsigned long long* best_keys, const HistBin* hist, RowState* states, Candidate* lists,
                  int32_t* ids) {
  cuda::start_kernel();
  __shared__ Shared s;
  __shared__ RowState state;
  const int64_t row = blockIdx.x;
  const RowSettings settings_row = settings[row];
  const unsigned long long best = row_best(best_keys, row);
  if (best == 0 || settings_row.temperature == 0.0) {  // greedy, or every logit NaN or -inf: token 0
    if (threadIdx.x == 0) ids[row] = best == 0 ? 0 : key_id(best);
    return;
  }
  if (threadIdx.x == 0) state = states[row], state.collect = 0;
  __syncthreads();
  if (state.step == kDone) return;
  const HistBin* bins = hist + row * kHistBins;
  Candidate* list = lists + row * 3 * vocab;
  Candidate* work_a = list + vocab;
  Candidate* work_b = work_a + vocab;
  const int n = state.list_count;
  // A step whose boundary lies in `bin`: true when the list holds that bin's candidates; else
  // asks for them and the row waits for the next launch.
  auto have = [&](int bin) {
    const bool held = bin == state.list_bin;
    __syncthreads();  // every thread has read list_bin
    if (!held && threadIdx.x == 0) state.list_bin = bin, state.list_count = 0, state.collect = 1;
    return held;
  };
  // The floor among the list's candidates (its bin's keys are all kept above the floor's bin).
  auto list_floor = [&](int bin) { return bin == state.floor_bin ? state.floor_key : uint64_t(0); };
  bool waiting = false;
  while (!waiting) {
    __syncthreads();  // thread 0's last writes to state are seen
    const int step = state.step;
    if (step == kDone) break;
    if (step == kTopK) {
      const WideSum count = kept_total(s, bins, state, true);
      if (settings_row.top_k > 0 && WideSum(settings_row.top_k) < count) {
        const BinPick at = find_bin(s, bins, state, WideSum(settings_row.top_k), true);
        if (!have(at.bin)) { waiting = true; continue; }
        const Picked picked =
            select(s, list, n, list_floor(at.bin), WideSum(settings_row.top_k) - at.before, true, work_a, work_b);
        set_floor(s, state, list, n, picked.key, at.bin);
      }
    } else if (step == kTopP) {
      if (__uint_as_float(settings_row.top_p_bits) < 1.0f) {
        const WideSum goal = draw::mass_threshold(settings_row.top_p_bits, kept_total(s, bins, state, false));
        const BinPick at = find_bin(s, bins, state, goal, false);
        if (!have(at.bin)) { waiting = true; continue; }
        const Picked picked = select(s, list, n, list_floor(at.bin), goal - at.before, false, work_a, work_b);
        set_floor(s, state, list, n, picked.key, at.bin);
      }
    } else if (step == kMinP) {
      if (settings_row.min_p > 0.0f) {
        // Weights fall along the order, so the keys of weight >= min_p * 2^52 are a prefix too.
        const double min_weight = double(settings_row.min_p) * 0x1p52;
        const int bin = min_p_bin(s, bins, state, min_weight, logits[row * vocab + key_id(best)],
                                  settings_row.temperature);
        if (!have(bin)) { waiting = true; continue; }
        set_floor(s, state, list, n, smallest_key(s, list, n, list_floor(bin), min_weight), bin);
      }
    } else {
      // Step 4: the first kept token whose prefix sum exceeds floor(r * total / 2^53).
      const auto r = uint64_t(uniform_at(settings_row.seed, uint64_t(settings_row.position), Sampler::kTokenStream) *
                              0x1p53);
      const WideSum goal = draw::scale_by_draw(r, kept_total(s, bins, state, false)) + 1;
      const BinPick at = find_bin(s, bins, state, goal, false);
      if (!have(at.bin)) { waiting = true; continue; }
      const Picked picked = select(s, list, n, list_floor(at.bin), goal - at.before, false, work_a, work_b);
      if (threadIdx.x == 0) ids[row] = key_id(picked.key);
    }
    if (threadIdx.x == 0) ++state.step;
  }
  __syncthreads();
  if (threadIdx.x == 0) states[row] = state;
}

// Greedy rows alone: each row's best key by parts, then its id (every row's token the argmax).
void launch_greedy(cuda::Launches& launches, const float* logits, int64_t n, int64_t vocab,
                   unsigned long long* best_keys, int32_t* ids) {
  cuda::launch(best_key_kernel, dim3(kBestParts, unsigned(n)), kBestThreads, 0, launches, logits, vocab, best_keys,
               static_cast<HistBin*>(nullptr), static_cast<RowState*>(nullptr));
  cuda::launch(greedy_kernel, cuda::blocks_for(n, 128), 128, 0, launches,
               static_cast<const unsigned long long*>(best_keys), n, ids);
}

}  // namespace

namespace cuda {

void sample(Context& context, const Tensor& logits, const std::vector<SampleRow>& rows, const Tensor& ids) {
  const int64_t n = logits.rows(), vocab = logits.cols();
  require(int64_t(rows.size()) == n && ids.numel() >= n, "sample: one SampleRow and one id per logit row");
  if (n == 0) return;
  std::vector<RowSettings> host(static_cast<size_t>(n));
  bool any_sampled = false;  // greedy rows need no candidate lists
  int collects = 0;          // the most steps a row takes
  for (int64_t r = 0; r < n; ++r) {
    const SamplingParams& p = rows[size_t(r)].params;
    if (p.temperature != 0.0f) {
      any_sampled = true;
      collects = std::max(collects, 1 + int(p.top_k > 0) + int(p.top_p < 1.0f) + int(p.min_p > 0.0f));
    }
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
  if (!any_sampled) return launch_greedy(context.launches, ptr<float>(logits), n, vocab, best_keys, ptr<int32_t>(ids));
  // A row's candidate lists (the collected bin, then the select's two work lists) take up to
  // 3 * vocab candidates; rows past what kListBytes holds take their steps in later chunks.
  const int64_t row_list = 3 * vocab;
  const int64_t row_bytes = std::max<int64_t>(row_list * int64_t(sizeof(Candidate)), 1);  // (a vocabulary of 0)
  const int64_t chunk = std::clamp<int64_t>(kListBytes / row_bytes, 1, n);
  auto* lists = static_cast<Candidate*>(
      context.scratch.sample.lists.get(context.launches, size_t(chunk * row_list) * sizeof(Candidate)));
  auto* states = static_cast<RowState*>(context.scratch.sample.bins.get(
      context.launches, size_t(n) * (sizeof(RowState) + kHistBins * sizeof(HistBin))));
  auto* hist = reinterpret_cast<HistBin*>(states + n);
  // Blocks a row for the passes over the vocabulary: enough for the whole device at few rows.
  const int parts = int(std::clamp<int64_t>(1024 / n, 4, 128));
  const dim3 part_grid{unsigned(parts), unsigned(n)};
  const auto* row_settings = static_cast<const RowSettings*>(settings.data);
  launch(best_key_kernel, dim3(kBestParts, unsigned(n)), kBestThreads, 0, context.launches, ptr<float>(logits), vocab,
         best_keys, hist, states);
  launch(hist_kernel, part_grid, kPartThreads, 0, context.launches, ptr<float>(logits), vocab, parts, row_settings,
         static_cast<const unsigned long long*>(best_keys), static_cast<const RowState*>(states), hist);
  // Each step a row takes (its filters, then the draw) may ask for one bin's candidates: a
  // collect, then a finish, for each.
  for (int64_t first = 0; first < n; first += chunk) {
    const int64_t rows_here = std::min(chunk, n - first);
    const float* chunk_logits = ptr<float>(logits) + first * vocab;
    const RowSettings* chunk_settings = row_settings + first;
    const auto* chunk_best = static_cast<const unsigned long long*>(best_keys) + first * kBestParts;
    RowState* chunk_states = states + first;
    for (int pass = 0; pass <= collects; ++pass) {
      if (pass > 0)
        launch(collect_kernel, dim3{unsigned(parts), unsigned(rows_here)}, kPartThreads, 0, context.launches,
               chunk_logits, vocab, parts, chunk_settings, chunk_best, chunk_states, lists);
      launch(finish_kernel, unsigned(rows_here), kThreads, 0, context.launches, chunk_logits, vocab, chunk_settings,
             chunk_best, static_cast<const HistBin*>(hist + first * kHistBins), chunk_states, lists,
             ptr<int32_t>(ids) + first);
    }
  }
}

void argmax(Context& context, const Tensor& logits, const Tensor& ids) {
  const int64_t n = logits.rows(), vocab = logits.cols();
  require(ids.numel() >= n, "argmax: one id per logit row");
  if (n == 0) return;
  auto* best_keys = static_cast<unsigned long long*>(
      context.scratch.sample.best_keys.get(context.launches, size_t(n) * kBestParts * sizeof(unsigned long long)));
  launch_greedy(context.launches, ptr<float>(logits), n, vocab, best_keys, ptr<int32_t>(ids));
}

}  // namespace cuda
}  // namespace lockstep
