// CPU mixture-of-experts ops: sigmoid routing with grouped top-k, and the routed experts.
// Each expert runs one matmul over the rows routed to it (matmul is row-invariant, so a row's
// result does not depend on who else chose that expert); each row then sums its experts'
// outputs in its own rank order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace lockstep {

namespace {

// Indices of the k largest values, best first, ties to the lower index.
void top_indices(const float* values, int64_t n, int64_t k, int32_t* out) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = std::min(count, k);
    if (at == k && !(values[i] > values[out[k - 1]])) continue;
    if (at == k) --at;
    while (at > 0 && values[i] > values[out[at - 1]]) {
      out[at] = out[at - 1];
      --at;
    }
    out[at] = int32_t(i);
    count = std::min(count + 1, k);
  }
}

}  // namespace

void CpuBackend::moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& routing, const Tensor& ids,
                           const Tensor& weights) {
  const int64_t experts = logits.cols();
  const int64_t k = ids.cols();
  const int64_t per_group = experts / routing.groups;
  std::vector<float>& score = route_score_;
  std::vector<float>& choice = route_choice_;
  std::vector<float>& group_score = route_group_score_;
  std::vector<int32_t>& best = route_best_;
  score.resize(static_cast<size_t>(experts));
  choice.resize(static_cast<size_t>(experts));
  group_score.resize(static_cast<size_t>(routing.groups));
  best.resize(static_cast<size_t>(routing.groups));
  for (int64_t r = 0; r < logits.rows(); ++r) {
    const float* row = logits.as<float>() + r * experts;
    for (int64_t e = 0; e < experts; ++e) {
      score[size_t(e)] = 1.0f / (1.0f + std::exp(-row[e]));
      choice[size_t(e)] = score[size_t(e)] + bias.as<float>()[e];
    }
    if (routing.topk_groups < routing.groups) {
      for (int64_t g = 0; g < routing.groups; ++g) {
        int32_t top2[2];
        top_indices(choice.data() + g * per_group, per_group, std::min<int64_t>(2, per_group), top2);
        group_score[size_t(g)] = choice[size_t(g * per_group + top2[0])] +
                                 (per_group > 1 ? choice[size_t(g * per_group + top2[1])] : 0.0f);
      }
      top_indices(group_score.data(), routing.groups, routing.topk_groups, best.data());
      for (int64_t e = 0; e < experts; ++e) {
        int32_t group = int32_t(e / per_group);
        if (std::find(best.begin(), best.begin() + routing.topk_groups, group) == best.begin() + routing.topk_groups)
          choice[size_t(e)] = -std::numeric_limits<float>::infinity();
      }
    }
    int32_t* row_ids = ids.as<int32_t>() + r * k;
    float* row_weights = weights.as<float>() + r * k;
    top_indices(choice.data(), experts, k, row_ids);
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += score[size_t(row_ids[j])];
    for (int64_t j = 0; j < k; ++j) {
      float w = score[size_t(row_ids[j])];
      if (routing.normalize) w /= sum + 1e-20f;
      row_weights[j] = w * routing.scale;
    }
  }
}

void CpuBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& up,
                             const Tensor& down, int64_t always, const Tensor& out) {
  const int64_t n = x.rows(), d = x.cols(), k = ids.cols();
  const int64_t experts = up.shape[0], inner = up.shape[1];
  const int64_t ranks = k + always;  // a row's slots: its k routed experts, then the `always` ones
  // routed[e]: the (row, rank) pairs of expert e, in row order.
  std::vector<std::vector<std::pair<int32_t, int32_t>>>& routed = moe_routed_;
  routed.resize(static_cast<size_t>(experts));
  for (auto& pairs : routed) pairs.clear();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k; ++j) routed[size_t(ids.as<int32_t>()[r * k + j])].push_back({int32_t(r), int32_t(j)});
    for (int64_t j = 0; j < always; ++j) routed[size_t(experts - always + j)].push_back({int32_t(r), int32_t(k + j)});
  }
  moe_slots_.resize(size_t(n * ranks * d));  // [n, ranks, d]: each (row, rank) expert output
  for (int64_t e = 0; e < experts; ++e) {
    const auto& pairs = routed[size_t(e)];
    if (pairs.empty()) continue;
    const int64_t m = int64_t(pairs.size());
    moe_in_.resize(size_t(m * d));
    moe_hidden_.resize(size_t(m * inner));
    moe_out_.resize(size_t(m * d));
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(x.as<float>() + int64_t(pairs[size_t(i)].first) * d, d, moe_in_.data() + i * d);
    Tensor in{moe_in_.data(), DType::f32, {m, d}};
    Tensor hidden{moe_hidden_.data(), DType::f32, {m, inner}};
    Tensor result{moe_out_.data(), DType::f32, {m, d}};
    Tensor up_e = up.first_dim_slice(e, 1).reshaped({inner, d});
    Tensor down_e = down.first_dim_slice(e, 1).reshaped({d, inner});
    matmul(in, up_e, hidden);
    relu_squared(hidden, hidden);
    matmul(hidden, down_e, result);
    for (int64_t i = 0; i < m; ++i) {
      auto [row, rank] = pairs[size_t(i)];
      std::copy_n(moe_out_.data() + i * d, d, moe_slots_.data() + (int64_t(row) * ranks + rank) * d);
    }
  }
  pool_.parallel_for(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      // The sum in rank order: the routed experts weighted, then the `always` ones.
      float* o = out.as<float>() + r * d;
      std::fill(o, o + d, 0.0f);
      for (int64_t j = 0; j < ranks; ++j) {
        const float w = j < k ? weights.as<float>()[r * k + j] : 1.0f;
        const float* slot = moe_slots_.data() + (r * ranks + j) * d;
        for (int64_t i = 0; i < d; ++i) o[i] += w * slot[i];
      }
    }
  });
}

}  // namespace lockstep
