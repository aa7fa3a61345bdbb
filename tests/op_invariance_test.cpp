// Batch invariance of every backend op: a row's output is bit-identical whether its launch
// holds 1 row or up to 33 (64 on the GPU, and fill-sized launches of 256 and 300 rows there),
// wherever the row sits, and whatever the other rows hold.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "test_support.h"

namespace lockstep {
namespace {

constexpr int64_t kMaxRows = 33;

// Runs `op` on an n-row launch whose input rows are rows[0..n) of `inputs` (each input is
// [kMaxRows, cols] f32 or i32 host data) and returns the output rows, [n, out_cols].
using RowOp = std::function<void(Backend&, const std::vector<Tensor>& in, const Tensor& out)>;

struct OpCase {
  std::string name;
  std::vector<std::pair<DType, int64_t>> inputs;  // dtype and columns per input
  int64_t out_cols;
  DType out_dtype = DType::f32;
  RowOp op;
  std::function<void(std::mt19937&, int input, std::vector<uint8_t>& row)> fill = nullptr;  // optional
};

std::vector<uint8_t> random_row(std::mt19937& rng, DType dtype, int64_t cols) {
  std::vector<uint8_t> row(size_t(cols) * dtype_size(dtype));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < cols; ++i) {
    float value = normal(rng);
    if (dtype == DType::f32) std::memcpy(row.data() + i * 4, &value, 4);
    if (dtype == DType::bf16) {
      uint16_t word = f32_to_bf16(value);
      std::memcpy(row.data() + i * 2, &word, 2);
    }
  }
  return row;
}

// Output row `target` of an n-row launch where row `target` has the target inputs and the
// others hold fresh random rows.
std::vector<uint8_t> run_with_neighbours(Backend& backend, const OpCase& c, const std::vector<std::vector<uint8_t>>& target,
                                         int64_t n, int64_t at, std::mt19937& rng) {
  std::vector<OwnedTensor> owned;
  std::vector<Tensor> views;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    auto [dtype, cols] = c.inputs[i];
    std::vector<uint8_t> host;
    for (int64_t r = 0; r < n; ++r) {
      std::vector<uint8_t> row = target[i];
      if (r != at) {
        row = random_row(rng, dtype, cols);
        if (c.fill) c.fill(rng, int(i), row);
      }
      host.insert(host.end(), row.begin(), row.end());
    }
    owned.push_back(backend.alloc(dtype, {n, cols}));
    backend.upload(owned.back(), host.data());
    views.push_back(owned.back());
  }
  OwnedTensor out = backend.alloc(c.out_dtype, {n, c.out_cols});
  c.op(backend, views, out);
  std::vector<uint8_t> all(out.view().bytes());
  backend.download(all.data(), out);
  size_t row_bytes = size_t(c.out_cols) * dtype_size(c.out_dtype);
  return {all.begin() + at * int64_t(row_bytes), all.begin() + (at + 1) * int64_t(row_bytes)};
}

void expect_invariant(Backend& backend, const OpCase& c) {
  std::mt19937 rng(1234);
  std::vector<std::vector<uint8_t>> target;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    target.push_back(random_row(rng, c.inputs[i].first, c.inputs[i].second));
    if (c.fill) c.fill(rng, int(i), target.back());
  }
  std::vector<uint8_t> alone = run_with_neighbours(backend, c, target, 1, 0, rng);
  // The GPU's rounds run up to 64 wide; the CPU check stops at 33 to stay quick.
  const bool gpu = backend.name() == "cuda";
  std::vector<int64_t> sizes;
  for (int64_t n = 1; n <= (gpu ? 64 : kMaxRows); ++n) sizes.push_back(n);
  if (gpu) sizes.insert(sizes.end(), {256, 300});  // fill-sized: other kernels, the same bits
  for (int64_t n : sizes) {
    for (int64_t at : {int64_t(0), n / 2, n - 1}) {
      std::vector<uint8_t> shared = run_with_neighbours(backend, c, target, n, at, rng);
      ASSERT_EQ(0, std::memcmp(alone.data(), shared.data(), alone.size()))
          << c.name << ": row " << at << " of " << n << " differs from the row alone";
    }
  }
}

class OpInvariance : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Backend> backend = make_test_backend(GetParam());
};

// Prepared: weights the backend may rearrange (the CUDA backend packs bf16 ones of 16k rows
// and k % 32 == 0), so each layout's kernels meet the row alone.
TEST_P(OpInvariance, MatmulF32AndBf16) {
  for (DType wtype : {DType::f32, DType::bf16}) {
    for (int64_t k : {int64_t(37), int64_t(128), int64_t(200), int64_t(1056)}) {
      for (bool prepared : {false, true}) {
        if (prepared && (wtype != DType::bf16 || k % 32 != 0)) continue;
        std::mt19937 rng(7);
        const int64_t m = prepared ? 48 : 45;
        OwnedTensor w = backend->alloc(wtype, {m, k});
        std::vector<uint8_t> host;
        for (int64_t r = 0; r < m; ++r) {
          auto row = random_row(rng, wtype, k);
          host.insert(host.end(), row.begin(), row.end());
        }
        backend->upload(w, host.data());
        if (prepared) backend->prepare_matmul_weight(w);
        Tensor wv = w;
        expect_invariant(*backend, {"matmul", {{DType::f32, k}}, m, DType::f32,
                                    [wv](Backend& b, const std::vector<Tensor>& in, const Tensor& out) {
                                      b.matmul(in[0], wv, out);
                                    }});
      }
    }
  }
}

TEST_P(OpInvariance, RmsNorm) {
  const int64_t d = 100;
  std::vector<float> weight(d);
  for (int64_t i = 0; i < d; ++i) weight[size_t(i)] = 0.5f + float(i) / d;
  OwnedTensor w = backend->alloc(DType::f32, {d});
  backend->upload(w, weight.data());
  Tensor wv = w;
  expect_invariant(*backend, {"rms_norm", {{DType::f32, d}}, d, DType::f32,
                              [wv](Backend& b, const std::vector<Tensor>& in, const Tensor& out) {
                                b.rms_norm(in[0], wv, 1e-5f, out);
                              }});
}

TEST_P(OpInvariance, ElementwiseOps) {
  const int64_t d = 77;
  expect_invariant(*backend, {"swiglu", {{DType::f32, d}, {DType::f32, d}}, d, DType::f32,
                              [](Backend& b, const std::vector<Tensor>& in, const Tensor& out) {
                                b.swiglu(in[0], in[1], out);
                              }});
  expect_invariant(*backend, {"add", {{DType::f32, d}, {DType::f32, d}}, d, DType::f32,
                              [](Backend& b, const std::vector<Tensor>& in, const Tensor& out) {
                                b.add(in[0], in[1], out);
                              }});
}

TEST_P(OpInvariance, TokenLogprobs) {
  const int64_t vocab = 1000, top = 20;
  auto fill_id = [&](std::mt19937& rng, int input, std::vector<uint8_t>& row) {
    if (input != 1) return;
    const int32_t id = int32_t(rng() % uint32_t(vocab));
    std::memcpy(row.data(), &id, 4);
  };
  expect_invariant(*backend, {"token_logprobs values", {{DType::f32, vocab}, {DType::i32, 1}}, 1 + top, DType::f32,
                              [&](Backend& b, const std::vector<Tensor>& in, const Tensor& out) {
                                OwnedTensor ids = b.alloc(DType::i32, {in[0].rows(), top});
                                b.token_logprobs(in[0], in[1], out, ids);
                              },
                              fill_id});
  expect_invariant(*backend, {"token_logprobs ids", {{DType::f32, vocab}, {DType::i32, 1}}, top, DType::i32,
                              [&](Backend& b, const std::vector<Tensor>& in, const Tensor& out) {
                                OwnedTensor values = b.alloc(DType::f32, {in[0].rows(), 1 + top});
                                b.token_logprobs(in[0], in[1], values, out);
                              },
                              fill_id});
}

TEST_P(OpInvariance, Rope) {
  const int64_t heads = 3, head_dim = 16, max_pos = 64;
  std::vector<float> table(size_t(max_pos * head_dim));
  for (size_t i = 0; i < table.size(); ++i) table[i] = std::sin(float(i) * 0.37f);
  OwnedTensor cos_sin = backend->alloc(DType::f32, {max_pos, head_dim});
  backend->upload(cos_sin, table.data());
  Tensor table_view = cos_sin;
  OpCase c{"rope", {{DType::f32, heads * head_dim}, {DType::i32, 1}}, heads * head_dim, DType::f32,
           [table_view](Backend& b, const std::vector<Tensor>& in, const Tensor& out) {
             int64_t n = in[0].rows();
             std::vector<float> copy(size_t(in[0].numel()));
             b.download(copy.data(), in[0]);
             b.upload(out, copy.data());
             b.rope(out.reshaped({n, heads, head_dim}), in[1].reshaped({n}), table_view);
           },
           [](std::mt19937& rng, int input, std::vector<uint8_t>& row) {
             if (input != 1) return;
             int32_t pos = int32_t(rng() % max_pos);
             std::memcpy(row.data(), &pos, 4);
           }};
  expect_invariant(*backend, c);
}

TEST_P(OpInvariance, EmbedAndGather) {
  const int64_t vocab = 50, d = 24;
  std::mt19937 rng(3);
  std::vector<uint8_t> host;
  for (int64_t r = 0; r < vocab; ++r) {
    auto row = random_row(rng, DType::bf16, d);
    host.insert(host.end(), row.begin(), row.end());
  }
  OwnedTensor table = backend->alloc(DType::bf16, {vocab, d});
  backend->upload(table, host.data());
  Tensor tv = table;
  auto id_fill = [](std::mt19937& r, int, std::vector<uint8_t>& row) {
    int32_t id = int32_t(r() % vocab);
    std::memcpy(row.data(), &id, 4);
  };
  expect_invariant(*backend, {"embed", {{DType::i32, 1}}, d, DType::f32,
                              [tv](Backend& b, const std::vector<Tensor>& in, const Tensor& out) {
                                b.embed(tv, in[0].reshaped({in[0].rows()}), out);
                              },
                              id_fill});
}

INSTANTIATE_TEST_SUITE_P(Backends, OpInvariance, ::testing::ValuesIn(test_backend_names()),
                         backend_param_name);

}  // namespace
}  // namespace lockstep
