// CUDA mixture-of-experts ops. Routing runs one thread per token. The experts: the (row,
// expert) slots are listed expert by expert, each expert's up and down matmuls run over its
// slots in one grouped launch (reading only the experts some token chose, and in rounds the
// `always` ones: the shared expert), and each row then sums its experts' outputs in its own
// rank order. The matmul is row-invariant, so a row's result does not depend on who else chose
// its experts, nor on whether an always expert ran grouped or plain.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_matmul.cuh"
#include "backend/cuda/cuda_ops.cuh"

namespace lockstep {

using cuda::ptr;

namespace {

constexpr int kMaxExperts = 512;
constexpr int kMaxGroups = 64;
// moe_experts: the always experts join the grouped launches in rounds of up to this many rows.
constexpr int64_t kGroupedAlwaysRows = 8;

// Indices of the k largest of values[0..n), best first, ties to the lower index.
__device__ void top_indices(const float* values, int n, int k, int32_t* out) {
  int count = 0;
  for (int i = 0; i < n; ++i) {
    int at = min(count, k);
    if (at == k && !(values[i] > values[out[k - 1]])) continue;
    if (at == k) --at;
    while (at > 0 && values[i] > values[out[at - 1]]) {
      out[at] = out[at - 1];
      --at;
    }
    out[at] = i;
    count = min(count + 1, k);
  }
}

__global__ void moe_route_kernel(const float* logits, const float* bias, MoeRouting routing, int64_t n, int experts,
                                 int k, int32_t* ids, float* weights) {
  cuda::start_kernel();
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= n) return;
  float score[kMaxExperts], choice[kMaxExperts], group_score[kMaxGroups];
  int32_t best[kMaxGroups];
  const float* row = logits + r * experts;
  for (int e = 0; e < experts; ++e) {
    score[e] = 1.0f / (1.0f + expf(-row[e]));
    choice[e] = score[e] + bias[e];
  }
  const int groups = int(routing.groups), per_group = experts / groups;
  if (routing.topk_groups < routing.groups) {
    for (int g = 0; g < groups; ++g) {
      int32_t top2[2];
      top_indices(choice + g * per_group, per_group, min(2, per_group), top2);
      group_score[g] = choice[g * per_group + top2[0]] + (per_group > 1 ? choice[g * per_group + top2[1]] : 0.0f);
    }
    top_indices(group_score, groups, int(routing.topk_groups), best);
    for (int e = 0; e < experts; ++e) {
      bool kept = false;
      for (int j = 0; j < routing.topk_groups; ++j) kept |= best[j] == e / per_group;
      if (!kept) choice[e] = -INFINITY;
    }
  }
  int32_t* row_ids = ids + r * k;
  float* row_weights = weights + r * k;
  top_indices(choice, experts, k, row_ids);
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) sum += score[row_ids[j]];
  for (int j = 0; j < k; ++j) {
    float w = score[row_ids[j]];
    if (routing.normalize) w /= sum + 1e-20f;
    row_weights[j] = w * routing.scale;
  }
}

// The common routing (no expert groups) with a warp per token: lane l holds experts l, l + 32,
// ...; each of the k picks is a warp-wide argmax (ties to the lower expert), so the choice,
// the weights and their order equal moe_route_kernel's. Lane j keeps pick j and writes it. The
// correction bias is a model weight (no kernel writes it), so it is read before the wait:
// load_correction, then route_token.
template <int kPerLane>
__device__ inline void load_correction(const float* bias, int experts, float (&correction)[kPerLane]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) correction[i] = lane + 32 * i < experts ? bias[lane + 32 * i] : 0.0f;
}

template <int kPerLane>
__device__ void route_token(const float* logits, const float (&correction)[kPerLane], const MoeRouting& routing,
                            int64_t r, int experts, int k, int32_t* ids, float* weights) {
  const int lane = threadIdx.x % 32;
  const float* row = logits + r * experts;
  float score[kPerLane], choice[kPerLane];
  bool open[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + 32 * i;
    open[i] = e < experts;
    score[i] = open[i] ? 1.0f / (1.0f + expf(-row[e])) : 0.0f;
    choice[i] = open[i] ? score[i] + correction[i] : 0.0f;
    if (choice[i] != choice[i]) choice[i] = -INFINITY;  // NaN never beats a number
  }
  constexpr int kNone = 0x7fffffff;
  float sum = 0.0f, mine = 0.0f;  // mine: pick `lane`'s score
  int32_t mine_id = kNone;
  for (int j = 0; j < k; ++j) {
    float best = -INFINITY, best_score = 0.0f;
    int best_e = kNone;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i;
      if (open[i] && (best_e == kNone || choice[i] > best)) best = choice[i], best_score = score[i], best_e = e;
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_e = __shfl_xor_sync(0xffffffffu, best_e, offset);
      const bool wins = other_e != kNone &&
                        (best_e == kNone || other > best || (other == best && other_e < best_e));
      if (wins) best = other, best_e = other_e;
    }
    // The winner's score, from the lane that holds that expert (its own best candidate).
    best_score = __shfl_sync(0xffffffffu, best_score, best_e == kNone ? 0 : best_e % 32);
    if (best_e != kNone && best_e % 32 == lane) {
#pragma unroll
      for (int i = 0; i < kPerLane; ++i)
        if (lane + 32 * i == best_e) open[i] = false;
    }
    if (lane == j) mine = best_score, mine_id = best_e;
    sum += best_score;
  }
  if (lane >= k) return;
  float w = mine;
  if (routing.normalize) w /= sum + 1e-20f;
  ids[r * k + lane] = mine_id;
  weights[r * k + lane] = w * routing.scale;
}

template <int kPerLane>
__global__ void moe_route_warp_kernel(const float* logits, const float* bias, MoeRouting routing, int64_t n,
                                      int experts, int k, int32_t* ids, float* weights) {
  cuda::allow_early_launch();
  const int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  float correction[kPerLane];
  load_correction(bias, experts, correction);
  cuda::wait_for_inputs();
  if (r >= n) return;  // whole warps leave together
  route_token(logits, correction, routing, r, experts, k, ids, weights);
}

// An exclusive prefix sum over the block (one value per thread, kMaxExperts threads); `total`
// gets the sum. Integer adds: exact in any order.
__device__ int32_t block_exclusive_sum(int32_t v, int32_t* warp_sums, int32_t& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int32_t inclusive = v;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int32_t other = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  __syncthreads();  // warp_sums is free
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  int32_t before = 0;
  total = 0;
  for (int w = 0; w < kMaxExperts / 32; ++w) {
    if (w < warp) before += warp_sums[w];
    total += warp_sums[w];
  }
  return before + inclusive - v;
}

// A launch's slots, one per (row, expert) product: the routed ones first, slot row * k + rank;
// then those of the last `always` experts (which every row takes), slot n * k + j * n + row for
// the j-th of them.
struct Slots {
  int64_t n;
  int k, always, experts;
  __device__ int32_t expert(const int32_t* ids, int64_t slot) const {
    return slot < n * k ? ids[slot] : int32_t(experts - always + (slot - n * k) / n);
  }
  __device__ int32_t row(int64_t slot) const { return int32_t(slot < n * k ? slot / k : (slot - n * k) % n); }
};

void key_add(cuda::LaunchKey& key, const Slots& s) {
  static_assert(sizeof(Slots) == 24, "key_add(Slots) must list every field");
  cuda::key_add(key, s.n), cuda::key_add(key, s.k), cuda::key_add(key, s.always), cuda::key_add(key, s.experts);
}

// Lists slots [0, listed) expert by expert: segments[e] .. segments[e + 1] are expert e's
// entries; slot_of[i] and row_of[i] the slot and token row of entry i. Within an expert the
// entries are in whatever order the atomics give: each entry's matmul row is computed from its
// own x row alone (row-invariant), so the order changes no bit of any result. active[0 ..)
// lists the experts with entries in expert order, then -1 up to `launched` entries, so the
// expert matmuls launch one block row per possible expert rather than per expert. One block of
// kMaxExperts threads: counts by shared atomics, then prefix sums, then placement.
struct List {
  int64_t listed;
  int launched;
  int32_t *segments, *active, *slot_of, *row_of;
};

void key_add(cuda::LaunchKey& key, const List& l) {
  static_assert(sizeof(List) == 48, "key_add(List) must list every field");
  cuda::key_add(key, l.listed), cuda::key_add(key, l.launched);
  for (const int32_t* p : {l.segments, l.active, l.slot_of, l.row_of}) cuda::key_add(key, p);
}

__device__ void list_slots(const int32_t* ids, const Slots& slots, const List& list) {
  __shared__ int32_t counts[kMaxExperts], cursor[kMaxExperts], warp_sums[kMaxExperts / 32];
  const int64_t listed = list.listed;
  const int launched = list.launched;
  int32_t *segments = list.segments, *active = list.active, *slot_of = list.slot_of, *row_of = list.row_of;
  const int e = threadIdx.x, experts = slots.experts;
  counts[e] = 0;
  __syncthreads();
  for (int64_t s = threadIdx.x; s < listed; s += kMaxExperts) atomicAdd(&counts[slots.expert(ids, s)], 1);
  __syncthreads();
  const int32_t count = e < experts ? counts[e] : 0;
  int32_t total = 0, used = 0;
  const int32_t first = block_exclusive_sum(count, warp_sums, total);
  const int32_t rank = block_exclusive_sum(count > 0 ? 1 : 0, warp_sums, used);
  if (e < experts) segments[e] = first, cursor[e] = first;
  if (e == 0) segments[experts] = total;
  if (count > 0 && rank < launched) active[rank] = e;
  for (int i = used + e; i < launched; i += kMaxExperts) active[i] = -1;
  __syncthreads();
  for (int64_t s = threadIdx.x; s < listed; s += kMaxExperts) {
    const int32_t at = atomicAdd(&cursor[slots.expert(ids, s)], 1);
    slot_of[at] = int32_t(s);
    row_of[at] = slots.row(s);
  }
}

__global__ void __launch_bounds__(kMaxExperts) moe_list_kernel(const int32_t* ids, Slots slots, List list) {
  cuda::start_kernel();
  list_slots(ids, slots, list);
}

// A round of up to kGroupedAlwaysRows rows without expert groups: warp w routes token w as
// moe_route_warp_kernel does (the same code, so the same ids and weights), then the block
// lists the slots as moe_list_kernel does: one launch for the two.
template <int kPerLane>
__global__ void __launch_bounds__(kMaxExperts)
    moe_route_list_kernel(const float* logits, const float* bias, MoeRouting routing, int router_experts,
                          float* weights, int32_t* ids, Slots slots, List list) {
  cuda::allow_early_launch();
  float correction[kPerLane];
  load_correction(bias, router_experts, correction);
  cuda::wait_for_inputs();
  const int warp = threadIdx.x / 32;
  if (warp < slots.n) route_token(logits, correction, routing, warp, router_experts, slots.k, ids, weights);
  __syncthreads();  // every token's ids are written, and seen by the whole block
  list_slots(ids, slots, list);
}

// The sum over row r's routed slots, in rank order, of weights[r][j] * results[slot][c], then
// over the always experts' slots in order. The loads go out eight at a time (read-only path:
// the kernels ahead wrote them), before the adds.
__device__ inline float combined(const float* results, const float* weights, const Slots& slots, int64_t d, int64_t r,
                                 int64_t c) {
  constexpr int kBatch = 8;
  const int64_t n = slots.n, k = slots.k, count = k + slots.always;
  float acc = 0.0f;
  for (int64_t first = 0; first < count; first += kBatch) {
    float w[kBatch], v[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int64_t j = first + i;
      const int64_t slot = j < k ? r * k + j : n * k + (j - k) * n + r;
      w[i] = j < k ? __ldg(weights + r * k + j) : 1.0f;
      v[i] = j < count ? __ldg(results + slot * d + c) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      if (first + i < k)
        acc = fmaf(w[i], v[i], acc);
      else if (first + i < count)
        acc += v[i];
    }
  }
  return acc;
}

__global__ void moe_combine_kernel(const float* results, const float* weights, Slots slots, int64_t d, float* out) {
  cuda::start_kernel();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= slots.n * d) return;
  out[i] = combined(results, weights, slots, d, i / d, i % d);
}

}  // namespace

namespace cuda {

namespace {

// The routing moe runs in the expert list's launch.
struct MoeRoute {
  const Tensor* logits;
  const Tensor* bias;
  MoeRouting routing;
};

void experts_then(Context& context, const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& up,
                  const Tensor& down, int64_t always, const Tensor& out, const MoeRoute* route);

}  // namespace

void moe_route(Context& context, const Tensor& logits, const Tensor& bias, const MoeRouting& routing,
               const Tensor& ids, const Tensor& weights) {
  const int64_t n = logits.rows();
  const int experts = int(logits.cols());
  require(experts <= kMaxExperts && routing.groups <= kMaxGroups, "moe_route: over 512 experts or 64 groups");
  const int k = int(ids.cols());
  require(k <= 32, "moe_route: over 32 experts per token");
  if (n == 0) return;
  const float* in = ptr<float>(logits);
  const float* correction = ptr<float>(bias);
  int32_t* out_ids = ptr<int32_t>(ids);
  float* out_weights = ptr<float>(weights);
  const unsigned warp_blocks = blocks_for(n * 32, 128);
  if (routing.topk_groups < routing.groups)
    launch(moe_route_kernel, blocks_for(n, 64), 64, 0, context.launches, in, correction, routing, n, experts, k,
           out_ids, out_weights);
  else if (experts <= 128)
    launch(moe_route_warp_kernel<4>, warp_blocks, 128, 0, context.launches, in, correction, routing, n, experts, k,
           out_ids, out_weights);
  else
    launch(moe_route_warp_kernel<16>, warp_blocks, 128, 0, context.launches, in, correction, routing, n, experts, k,
           out_ids, out_weights);
}

void moe_experts(Context& context, const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& up,
                 const Tensor& down, int64_t always, const Tensor& out) {
  experts_then(context, x, ids, weights, up, down, always, out, nullptr);
}

// Rounds of up to kGroupedAlwaysRows rows without expert groups route in the list's launch.
void moe(Context& context, const Tensor& x, const Tensor& logits, const Tensor& bias, const MoeRouting& routing,
         const Tensor& up, const Tensor& down, int64_t always, const Tensor& ids, const Tensor& weights,
         const Tensor& out) {
  const int64_t n = x.rows();
  if (n == 0 || n > kGroupedAlwaysRows || routing.topk_groups < routing.groups || ids.cols() > 32 ||
      logits.cols() > kMaxExperts) {
    moe_route(context, logits, bias, routing, ids, weights);
    moe_experts(context, x, ids, weights, up, down, always, out);
    return;
  }
  const MoeRoute route{&logits, &bias, routing};
  experts_then(context, x, ids, weights, up, down, always, out, &route);
}

namespace {

void experts_then(Context& context, const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& up,
                  const Tensor& down, int64_t always, const Tensor& out, const MoeRoute* route) {
  const int64_t n = x.rows(), d = x.cols(), k = ids.cols();
  const int64_t experts = up.shape[0], inner = up.shape[1];
  require(experts <= kMaxExperts, "moe_experts: over 512 experts");
  require(always >= 0 && always < experts, "moe_experts: `always` not in 0..experts - 1");
  if (n == 0) return;
  const Slots slot_info{n, int(k), int(always), int(experts)};
  const int64_t slot_count = n * (k + always);
  // In rounds of up to kGroupedAlwaysRows rows the always experts join the grouped launches
  // (two launches fewer a layer); with more rows a group's rows would be one block row's work,
  // so they run as plain matmuls over all rows, as a shared expert would. The bits are the
  // same either way: the matmul is row-invariant.
  const bool grouped_always = n <= kGroupedAlwaysRows;
  const int64_t listed = grouped_always ? slot_count : n * k;
  // At most `listed` experts have entries: the launches cover that many, not every expert.
  const int64_t launched = std::min(experts, listed);
  MoeScratch& scratch = context.scratch.moe;
  Launches& launches = context.launches;
  auto* segments = static_cast<int32_t*>(scratch.segments.get(launches, size_t(experts + 1 + launched) * 4));
  int32_t* active = segments + experts + 1;
  auto* slot_of = static_cast<int32_t*>(scratch.slot_of.get(launches, size_t(listed) * 4));
  auto* row_of = static_cast<int32_t*>(scratch.row_of.get(launches, size_t(listed) * 4));
  // [slot_count, inner]: the listed entries in list order, then (plain) the always experts' rows
  auto* hidden = static_cast<float*>(scratch.hidden.get(launches, size_t(slot_count * inner) * 4));
  auto* results = static_cast<float*>(scratch.results.get(launches, size_t(slot_count * d) * 4));  // by slot
  const bool up_packed = context.packed(up), down_packed = context.packed(down);
  // The split activations: the up launch's (below) and the down launches' (x of slot_count rows).
  MatmulRows up_split, down_split;
  up_split.n = listed, up_split.x_rows = n, up_split.in_rows = row_of, up_split.packed = up_packed;
  down_split.n = down_split.x_rows = slot_count;
  const size_t split_bytes = std::max(matmul_workspace_bytes(up.dtype == DType::bf16, up_split, d),
                                      matmul_workspace_bytes(down.dtype == DType::bf16, down_split, inner));
  void* workspace = split_bytes ? context.scratch.matmul_x.get(launches, split_bytes) : nullptr;
  int32_t* id = ptr<int32_t>(ids);  // written by the fused routing, read by the list
  float* weight = ptr<float>(weights);
  const float* in = ptr<float>(x);
  float* result = ptr<float>(out);
  const auto *up_w = static_cast<const uint8_t*>(up.data), *down_w = static_cast<const uint8_t*>(down.data);
  const WeightFormat up_format = format_of(up), down_format = format_of(down);
  const size_t up_bytes = up.bytes() / size_t(experts), down_bytes = down.bytes() / size_t(experts);
  const bool routed_here = route != nullptr;
  const float* logits = routed_here ? ptr<float>(*route->logits) : nullptr;
  const float* correction = routed_here ? ptr<float>(*route->bias) : nullptr;
  const MoeRouting routing = routed_here ? route->routing : MoeRouting{};
  const int router_experts = routed_here ? int(route->logits->cols()) : 0;
  const List list{listed, int(launched), segments, active, slot_of, row_of};
  if (!routed_here)
    launch(moe_list_kernel, 1, kMaxExperts, 0, launches, id, slot_info, list);
  else if (router_experts <= 128)
    launch(moe_route_list_kernel<4>, 1, kMaxExperts, 0, launches, logits, correction, routing, router_experts, weight,
           id, slot_info, list);
  else
    launch(moe_route_list_kernel<16>, 1, kMaxExperts, 0, launches, logits, correction, routing, router_experts,
           weight, id, slot_info, list);
  MatmulRows rows;
  rows.n = listed;
  rows.segments = segments;
  rows.group_ids = active;
  rows.groups = launched;
  rows.group_stride = inner * d;
  rows.max_group_rows = n;  // a token takes an expert once
  rows.x_rows = n;
  rows.in_rows = row_of;  // up: token rows in, list order out, relu2 applied
  rows.relu_squared = true;
  rows.packed = up_packed;
  launch_matmul(in, up_w, up_format, hidden, d, inner, rows, workspace, launches);
  rows.relu_squared = false;
  rows.packed = down_packed;
  rows.group_stride = d * inner;
  rows.x_rows = listed;
  rows.in_rows = nullptr;  // down: list order in, slots out
  rows.out_rows = slot_of;
  launch_matmul(hidden, down_w, down_format, results, inner, d, rows, workspace, launches);
  for (int64_t j = 0; !grouped_always && j < always; ++j) {
    const int64_t first = n * k + j * n;  // the j-th always expert's slots
    const int64_t e = experts - always + j;
    MatmulRows plain;
    plain.n = plain.x_rows = n;
    plain.relu_squared = true;
    plain.packed = up_packed;
    launch_matmul(in, up_w + size_t(e) * up_bytes, up_format, hidden + first * inner, d, inner, plain, workspace,
                  launches);
    plain.relu_squared = false;
    plain.packed = down_packed;
    launch_matmul(hidden + first * inner, down_w + size_t(e) * down_bytes, down_format, results + first * d, inner, d,
                  plain, workspace, launches);
  }
  launch(moe_combine_kernel, blocks_for(n * d, 256), 256, 0, launches, results, weight, slot_info, d, result);
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
