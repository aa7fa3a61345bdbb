// The MoE ops: routing (sigmoid scores, biased choice, grouped top-k) against a plain
// reference and on ties; the routed experts against float64 with f32 and bf16 weights; and
// a row's result bit-identical whatever else shares the launch, however skewed the routing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "op_test_data.h"
#include "tensor/quant.h"
#include "tensor/quant_tensor.h"
#include "test_support.h"

namespace lockstep {
namespace {

// Indices of `values` best first, ties to the lower index.
std::vector<int32_t> ranked(const std::vector<double>& values) {
  std::vector<int32_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return values[size_t(a)] > values[size_t(b)]; });
  return order;
}

struct Route {
  std::vector<int32_t> ids;
  std::vector<double> weights;
};

// One row's routing, spelled out: keep the groups with the best sums of their top two choice
// scores, take the k best choice scores there, weigh them by their unbiased scores.
Route reference_route(const float* logits, const std::vector<float>& bias, int64_t k, const MoeRouting& routing) {
  const int64_t experts = int64_t(bias.size()), per_group = experts / routing.groups;
  std::vector<double> score, choice, group_score;
  for (int64_t e = 0; e < experts; ++e) {
    score.push_back(1.0 / (1.0 + std::exp(-double(logits[e]))));
    choice.push_back(score.back() + bias[size_t(e)]);
  }
  for (int64_t g = 0; g < routing.groups; ++g) {
    std::vector<double> members(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
    std::vector<int32_t> best = ranked(members);
    group_score.push_back(members[size_t(best[0])] + (per_group > 1 ? members[size_t(best[1])] : 0.0));
  }
  std::vector<int32_t> groups = ranked(group_score);
  groups.resize(size_t(routing.topk_groups));
  for (int64_t e = 0; e < experts; ++e)
    if (std::find(groups.begin(), groups.end(), int32_t(e / per_group)) == groups.end()) choice[size_t(e)] = -1e300;
  Route route;
  route.ids = ranked(choice);
  route.ids.resize(size_t(k));
  double sum = 0;
  for (int32_t id : route.ids) sum += score[size_t(id)];
  for (int32_t id : route.ids)
    route.weights.push_back(score[size_t(id)] / (routing.normalize ? sum + 1e-20 : 1.0) * routing.scale);
  return route;
}

class MoeOps : public ::testing::TestWithParam<std::string> {
 protected:
  // moe_route over logits [n, experts]: ids and weights, [n, k] each.
  std::pair<std::vector<int32_t>, std::vector<float>> route(const std::vector<float>& logits,
                                                            const std::vector<float>& bias, int64_t k,
                                                            const MoeRouting& routing) {
    const int64_t experts = int64_t(bias.size()), n = int64_t(logits.size()) / experts;
    OwnedTensor tlogits = to_backend(*backend, DType::f32, {n, experts}, logits);
    OwnedTensor tbias = to_backend(*backend, DType::f32, {experts}, bias);
    OwnedTensor ids = backend->alloc(DType::i32, {n, k});
    OwnedTensor weights = backend->alloc(DType::f32, {n, k});
    backend->moe_route(tlogits, tbias, routing, ids, weights);
    return {ids_to_host(*backend, ids), to_host(*backend, weights)};
  }

  std::unique_ptr<Backend> backend = make_test_backend(GetParam());
};

TEST_P(MoeOps, RouteMatchesReference) {
  const int64_t experts = 32, k = 6, n = 20;
  std::mt19937 rng(12);
  const std::vector<float> logits = normal_floats(rng, n * experts), bias = normal_floats(rng, experts, 0.1f);
  for (MoeRouting routing : {MoeRouting{1, 1, true, 1.0f}, MoeRouting{4, 2, true, 2.5f}, MoeRouting{8, 3, false, 1.5f}}) {
    auto [ids, weights] = route(logits, bias, k, routing);
    for (int64_t r = 0; r < n; ++r) {
      Route want = reference_route(logits.data() + r * experts, bias, k, routing);
      for (int64_t j = 0; j < k; ++j) {
        ASSERT_EQ(ids[size_t(r * k + j)], want.ids[size_t(j)])
            << routing.groups << " groups keeping " << routing.topk_groups << ": row " << r << " rank " << j;
        EXPECT_NEAR(weights[size_t(r * k + j)], want.weights[size_t(j)], 1e-6 * (1 + want.weights[size_t(j)]))
            << routing.groups << " groups keeping " << routing.topk_groups << ": row " << r << " rank " << j;
      }
    }
  }
}

TEST_P(MoeOps, RouteBreaksTiesToTheLowerGroupAndExpert) {
  // Every score 0.5; 8 experts in 4 groups of 2, keeping 2 groups and 3 experts. The first
  // bias lifts experts 0, 3 and 4: groups 0, 1 and 2 tie on 1.1, so groups 0 and 1 are kept;
  // there 0 and 3 tie on 0.6, then 1 and 2 on 0.5. With no bias the lowest ids win.
  const std::vector<float> logits(8, 0.0f);
  const std::vector<std::vector<float>> biases = {{0.1f, 0, 0, 0.1f, 0.1f, 0, 0, 0}, std::vector<float>(8, 0.0f)};
  const std::vector<std::vector<int32_t>> expected = {{0, 3, 1}, {0, 1, 2}};
  const MoeRouting routing{4, 2, true, 1.0f};
  for (size_t i = 0; i < biases.size(); ++i) {
    auto [ids, weights] = route(logits, biases[i], 3, routing);
    EXPECT_EQ(ids, expected[i]) << "bias " << i;
    EXPECT_EQ(reference_route(logits.data(), biases[i], 3, routing).ids, expected[i]) << "reference, bias " << i;
    for (float w : weights) EXPECT_NEAR(w, 1.0 / 3, 1e-7) << "bias " << i;
  }
}

TEST_P(MoeOps, RouteRowIsBitIdenticalWhateverSharesTheLaunch) {
  const int64_t experts = 32, k = 6;
  const MoeRouting routing{4, 2, true, 2.5f};
  std::mt19937 rng(13);
  const std::vector<float> bias = normal_floats(rng, experts, 0.1f), target = normal_floats(rng, experts);
  auto [alone_ids, alone_weights] = route(target, bias, k, routing);
  for (int64_t n = 1; n <= 33; ++n) {
    for (int64_t at : {int64_t(0), n / 2, n - 1}) {
      std::vector<float> logits = normal_floats(rng, n * experts);
      std::copy(target.begin(), target.end(), logits.begin() + at * experts);
      auto [ids, weights] = route(logits, bias, k, routing);
      ASSERT_TRUE(std::equal(alone_ids.begin(), alone_ids.end(), ids.begin() + at * k)) << "row " << at << " of " << n;
      ASSERT_TRUE(same_bits(alone_weights, 0, weights, at * k, k)) << "row " << at << " of " << n;
    }
  }
}

constexpr int64_t kExperts = 8, kDim = 40, kInner = 24, kTopK = 3;

// Expert weights on the backend, and their values (bf16-rounded where stored as bf16).
struct Experts {
  std::vector<float> up, down;  // [experts, inner, d], [experts, d, inner]
  OwnedTensor up_tensor, down_tensor;
};

Experts make_experts(Backend& backend, DType dtype, std::mt19937& rng) {
  Experts e;
  e.up = normal_floats(rng, kExperts * kInner * kDim, 1.0f / std::sqrt(float(kDim)));
  e.down = normal_floats(rng, kExperts * kDim * kInner, 1.0f / std::sqrt(float(kInner)));
  auto place = [&](std::vector<float>& values, Shape shape) {
    if (dtype == DType::f32) return to_backend(backend, dtype, shape, values);
    std::vector<uint16_t> words;
    for (float& v : values) {
      words.push_back(f32_to_bf16(v));
      v = bf16_to_f32(words.back());
    }
    return to_backend(backend, dtype, shape, words);
  };
  e.up_tensor = place(e.up, {kExperts, kInner, kDim});
  e.down_tensor = place(e.down, {kExperts, kDim, kInner});
  return e;
}

// A launch of moe_experts: x [n, d], ids and weights [n, k], the last `always` experts taken by
// every row; returns out [n, d], which starts as garbage (the op writes every element).
std::vector<float> run_experts(Backend& backend, const Experts& e, const std::vector<float>& x,
                               const std::vector<int32_t>& ids, const std::vector<float>& weights, int64_t always = 0) {
  const int64_t n = int64_t(x.size()) / kDim;
  OwnedTensor tx = to_backend(backend, DType::f32, {n, kDim}, x);
  OwnedTensor tids = to_backend(backend, DType::i32, {n, kTopK}, ids);
  OwnedTensor tweights = to_backend(backend, DType::f32, {n, kTopK}, weights);
  OwnedTensor out = to_backend(backend, DType::f32, {n, kDim}, std::vector<float>(size_t(n * kDim), 1e30f));
  backend.moe_experts(tx, tids, tweights, e.up_tensor, e.down_tensor, always, out);
  return to_host(backend, out);
}

// n rows of k distinct random experts each among the first `routed`, with weights in (0, 1).
void random_routing(std::mt19937& rng, int64_t n, std::vector<int32_t>& ids, std::vector<float>& weights,
                    int64_t routed = kExperts) {
  std::uniform_real_distribution<float> unit(0.05f, 1.0f);
  std::vector<int32_t> all(size_t(routed), 0);
  std::iota(all.begin(), all.end(), 0);
  ids.clear();
  weights.clear();
  for (int64_t r = 0; r < n; ++r) {
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + kTopK);
    for (int64_t j = 0; j < kTopK; ++j) weights.push_back(unit(rng));
  }
}

// The routed experts of each row, weighted, then the last two experts (a shared expert's
// pieces) for every row with weight 1.
TEST_P(MoeOps, ExpertsMatchFloat64Reference) {
  constexpr int64_t kAlways = 2;
  for (DType dtype : {DType::f32, DType::bf16}) {
    std::mt19937 rng(21);
    Experts e = make_experts(*backend, dtype, rng);
    const int64_t n = 9;
    std::vector<float> x = normal_floats(rng, n * kDim), weights;
    std::vector<int32_t> ids;
    random_routing(rng, n, ids, weights, kExperts - kAlways);
    std::vector<float> got = run_experts(*backend, e, x, ids, weights, kAlways);
    for (int64_t r = 0; r < n; ++r) {
      std::vector<double> want(kDim, 0.0);
      for (int64_t j = 0; j < kTopK + kAlways; ++j) {
        const int64_t expert = j < kTopK ? ids[size_t(r * kTopK + j)] : kExperts - kAlways + (j - kTopK);
        const double weight = j < kTopK ? double(weights[size_t(r * kTopK + j)]) : 1.0;
        std::vector<double> hidden(kInner, 0.0);
        for (int64_t i = 0; i < kInner; ++i) {
          for (int64_t c = 0; c < kDim; ++c)
            hidden[size_t(i)] += double(e.up[size_t((expert * kInner + i) * kDim + c)]) * x[size_t(r * kDim + c)];
          hidden[size_t(i)] = std::pow(std::max(hidden[size_t(i)], 0.0), 2);
        }
        for (int64_t c = 0; c < kDim; ++c) {
          double down = 0;
          for (int64_t i = 0; i < kInner; ++i)
            down += double(e.down[size_t((expert * kDim + c) * kInner + i)]) * hidden[size_t(i)];
          want[size_t(c)] += weight * down;
        }
      }
      for (int64_t c = 0; c < kDim; ++c)
        EXPECT_NEAR(got[size_t(r * kDim + c)], want[size_t(c)], 1e-4 * (1 + std::abs(want[size_t(c)])))
            << dtype_name(dtype) << " row " << r << " column " << c;
    }
  }
}

TEST_P(MoeOps, ExpertsRowIsBitIdenticalWhateverSharesTheLaunch) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    std::mt19937 rng(22);
    Experts e = make_experts(*backend, dtype, rng);
    const std::vector<float> target_x = normal_floats(rng, kDim);
    std::vector<int32_t> target_ids, ids;
    std::vector<float> target_weights, weights;
    // With the last two experts taken by every row, as a shared expert's pieces are.
    random_routing(rng, 1, target_ids, target_weights, kExperts - 2);
    std::vector<float> alone = run_experts(*backend, e, target_x, target_ids, target_weights, 2);
    for (int64_t n = 1; n <= 33; ++n) {
      for (int64_t at : {int64_t(0), n / 2, n - 1}) {
        std::vector<float> x = normal_floats(rng, n * kDim);
        random_routing(rng, n, ids, weights, kExperts - 2);
        std::copy(target_x.begin(), target_x.end(), x.begin() + at * kDim);
        std::copy(target_ids.begin(), target_ids.end(), ids.begin() + at * kTopK);
        std::copy(target_weights.begin(), target_weights.end(), weights.begin() + at * kTopK);
        std::vector<float> shared = run_experts(*backend, e, x, ids, weights, 2);
        ASSERT_TRUE(same_bits(alone, 0, shared, at * kDim, kDim))
            << dtype_name(dtype) << ": row " << at << " of " << n;
      }
    }
  }
}

TEST_P(MoeOps, ExpertsRowIsBitIdenticalUnderSkewedAndBalancedRouting) {
  // 300 rows: a skewed expert sees up to 900 rows, past one 64-row matmul panel, and the GPU
  // takes its fill-sized (tiled) matmul.
  const int64_t n = 300, at = 20;
  for (DType dtype : {DType::f32, DType::bf16}) {
    std::mt19937 rng(23);
    Experts e = make_experts(*backend, dtype, rng);
    const std::vector<float> target_x = normal_floats(rng, kDim), target_weights = {0.5f, 0.3f, 0.2f};
    // The target's k slots to three experts, to two, and all to one.
    for (const std::vector<int32_t>& target_ids : {std::vector<int32_t>{2, 5, 7}, {2, 5, 2}, {4, 4, 4}}) {
      std::vector<float> alone = run_experts(*backend, e, target_x, target_ids, target_weights);
      std::vector<float> x = normal_floats(rng, n * kDim), weights;
      std::vector<int32_t> ids;
      random_routing(rng, n, ids, weights);
      std::copy(target_x.begin(), target_x.end(), x.begin() + at * kDim);
      std::copy(target_weights.begin(), target_weights.end(), weights.begin() + at * kTopK);
      std::vector<int32_t> skewed, balanced;
      for (int64_t r = 0; r < n; ++r) {
        skewed.insert(skewed.end(), target_ids.begin(), target_ids.end());
        for (int64_t j = 0; j < kTopK; ++j) balanced.push_back(int32_t((r * kTopK + j) % kExperts));
      }
      std::copy(target_ids.begin(), target_ids.end(), balanced.begin() + at * kTopK);
      std::vector<float> with_skewed = run_experts(*backend, e, x, skewed, weights);
      std::vector<float> with_balanced = run_experts(*backend, e, x, balanced, weights);
      std::string label = std::string(dtype_name(dtype)) + " experts " + std::to_string(target_ids[0]) + "," +
                          std::to_string(target_ids[1]) + "," + std::to_string(target_ids[2]);
      EXPECT_TRUE(same_bits(alone, 0, with_skewed, at * kDim, kDim)) << label << ": skewed";
      EXPECT_TRUE(same_bits(alone, 0, with_balanced, at * kDim, kDim)) << label << ": balanced";
    }
  }
}

// Quantized experts (MLX affine 4-bit, Q8_0 and FP8, in groups of 32): a row's result is bit for
// bit the same alone, among 1 to 33 rows, and among 300 rows that all take its experts, where
// each expert's launch holds hundreds of rows (the CUDA backend runs these formats on the tensor
// cores, and every launch of them, a round's or a fill's, must give a row the same sums).
TEST_P(MoeOps, QuantizedExpertsRowIsBitIdenticalWhateverSharesTheLaunch) {
  constexpr int64_t d = 64, inner = 32, experts = 8, topk = 3;
  for (const QuantLayout& layout : {QuantLayout{QuantFormat::mlx_affine, 32, 4, DType::bf16},
                                    QuantLayout{QuantFormat::q8_0}, QuantLayout{QuantFormat::fp8_e4m3, 32, 0, DType::f32}}) {
    SCOPED_TRACE(quant_layout_name(layout));
    std::mt19937 rng(24);
    auto stack = [&](int64_t rows, int64_t k) {
      const std::vector<float> values = normal_floats(rng, experts * rows * k, 1.0f / std::sqrt(float(k)));
      const size_t row_bytes = quant_row_total(layout, k);
      std::vector<std::byte> stored(size_t(experts * rows) * row_bytes);
      for (int64_t r = 0; r < experts * rows; ++r)
        EXPECT_TRUE(quantize_stored_row(layout, values.data() + r * k, k, stored.data() + size_t(r) * row_bytes).ok());
      OwnedTensor t = backend->alloc_quantized(layout, {experts, rows, k});
      backend->upload(t, stored.data());
      return t;
    };
    OwnedTensor up = stack(inner, d), down = stack(d, inner);
    auto run = [&](const std::vector<float>& x, const std::vector<int32_t>& ids, const std::vector<float>& weights) {
      const int64_t n = int64_t(x.size()) / d;
      OwnedTensor out = to_backend(*backend, DType::f32, {n, d}, std::vector<float>(size_t(n * d), 1e30f));
      backend->moe_experts(to_backend(*backend, DType::f32, {n, d}, x), to_backend(*backend, DType::i32, {n, topk}, ids),
                           to_backend(*backend, DType::f32, {n, topk}, weights), up, down, 1, out);
      return to_host(*backend, out);
    };
    const std::vector<float> target_x = normal_floats(rng, d), target_weights = {0.5f, 0.3f, 0.2f};
    const std::vector<int32_t> target_ids = {2, 5, 6};
    const std::vector<float> alone = run(target_x, target_ids, target_weights);
    for (int64_t n : {2, 5, 9, 17, 33, 300}) {
      const int64_t at = n / 2;
      std::vector<float> x = normal_floats(rng, n * d), weights;
      std::vector<int32_t> ids;
      for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < topk; ++j) {
          // 300 rows: every row takes the target's experts.
          ids.push_back(n == 300 ? target_ids[size_t(j)] : int32_t((r + 3 * j) % (experts - 1)));
          weights.push_back(0.25f + 0.1f * float(j));
        }
      std::copy(target_x.begin(), target_x.end(), x.begin() + at * d);
      std::copy(target_ids.begin(), target_ids.end(), ids.begin() + at * topk);
      std::copy(target_weights.begin(), target_weights.end(), weights.begin() + at * topk);
      EXPECT_TRUE(same_bits(alone, 0, run(x, ids, weights), at * d, d)) << "row " << at << " of " << n;
    }
  }
}

TEST_P(MoeOps, ReluSquared) {
  std::mt19937 rng(24);
  std::vector<float> x = normal_floats(rng, 3 * 4096 + 5);  // several parallel shares
  std::copy_n(std::vector<float>{-2.0f, -0.0f, 0.0f, 0.5f, 3.0f}.begin(), 5, x.begin());
  OwnedTensor tx = to_backend(*backend, DType::f32, {int64_t(x.size())}, x);
  OwnedTensor tout = backend->alloc(DType::f32, {int64_t(x.size())});
  backend->relu_squared(tx, tout);
  std::vector<float> got = to_host(*backend, tout);
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 5), (std::vector<float>{0.0f, 0.0f, 0.0f, 0.25f, 9.0f}));
  for (size_t i = 0; i < x.size(); ++i) {
    float positive = std::max(x[i], 0.0f);
    ASSERT_EQ(got[i], positive * positive) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, MoeOps, ::testing::ValuesIn(test_backend_names()),
                         backend_param_name);

}  // namespace
}  // namespace lockstep
