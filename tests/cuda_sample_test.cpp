// The CUDA backend's sampling ops against the CPU's: logit edits bit for bit, the sampler's ids
// exactly, log-probabilities within 1e-5. Skipped where no CUDA device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cuda_vs_cpu.h"

namespace lockstep {
namespace {

// Penalties and logit_bias: the same rule, each operation rounded on its own, bit for bit.
TEST_F(CudaVsCpu, EditLogitsMatchesTheHostBitForBit) {
  const int64_t n = 3, vocab = 1000;
  Pair logits = random(DType::f32, {n, vocab}, 4.0f);
  std::vector<LogitEdit> edits;
  for (int32_t row = 0; row < n; ++row)
    for (int32_t token = row; token < vocab; token += 37) {
      LogitEdit e;
      e.row = row;
      e.token = token;
      e.count = float(token % 5);
      e.in_context = token % 3 == 0;
      e.presence = 0.7f;
      e.frequency = 0.31f;
      e.repetition = row == 1 ? 1.0f : 1.37f;
      e.bias = token % 7 == 0 ? -100.0f : 0.25f * float(row);
      edits.push_back(e);
    }
  cpu.edit_logits(logits.cpu, edits);
  gpu->edit_logits(logits.gpu, edits);
  std::vector<float> on_gpu(size_t(n * vocab));
  gpu->download(on_gpu.data(), logits.gpu);
  EXPECT_EQ(std::memcmp(on_gpu.data(), logits.cpu.view().data, on_gpu.size() * sizeof(float)), 0);
}

// Grammar masks: the same tokens become -inf, on rows given in any order.
TEST_F(CudaVsCpu, MaskLogitsMatchesTheHostBitForBit) {
  const int64_t n = 4, vocab = 1037, words = (vocab + 31) / 32;
  Pair logits = random(DType::f32, {n, vocab}, 4.0f);
  const std::vector<int32_t> rows = {3, 0, 2};
  std::vector<uint32_t> bits(rows.size() * size_t(words));
  for (uint32_t& word : bits) word = uint32_t(rng());
  cpu.mask_logits(logits.cpu, rows, bits);
  gpu->mask_logits(logits.gpu, rows, bits);
  std::vector<float> on_gpu(size_t(n * vocab));
  gpu->download(on_gpu.data(), logits.gpu);
  EXPECT_EQ(std::memcmp(on_gpu.data(), logits.cpu.view().data, on_gpu.size() * sizeof(float)), 0);
  int64_t masked = 0;
  for (float v : on_gpu) masked += std::isinf(v);
  EXPECT_GT(masked, vocab);  // about half of three rows
}

TEST_F(CudaVsCpu, SampleMatchesTheHostSampler) {
  const int64_t n = 6, vocab = 50021;
  std::vector<float> host(size_t(n * vocab));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < vocab; ++i) {
      float v = normal(rng);
      if (r == 1) v = std::round(v * 2.0f) / 2.0f;  // many ties
      if (r == 1 && i % 97 == 0) v = i % 2 ? -INFINITY : NAN;
      if (r == 2) v = -INFINITY;
      if (r == 3 && (i == 17 || i == 40000)) v = INFINITY;
      if (r == 4 && i == 12345) v = 25.0f;
      if (r == 5) v = i % 1000 ? -std::fabs(v) : (i % 2000 ? 0.0f : -0.0f);  // the top: zeros of both signs
      host[size_t(r * vocab + i)] = v;
    }
  }
  Pair logits = make(DType::f32, {n, vocab}, host.data());
  // argmax (the MTP head's picks, with no row settings sent) is the greedy sampler.
  Pair greedy = output(DType::i32, {n});
  cpu.sample(logits.cpu, std::vector<SampleRow>(size_t(n)), greedy.cpu);
  gpu->argmax(logits.gpu, greedy.gpu);
  expect_equal_ids(greedy, "argmax");
  const std::vector<SamplingParams> settings = {
      {0.0f},           {1.0f},         {0.7f, 40},      {1.0f, 0, 0.9f},          {1.3f, 0, 1.0f, 0.05f},
      {0.8f, 50, 0.95f, 0.02f}, {5.0f, 0, 0.5f}, {0.05f}, {1.0f, 1}, {1.0f, 0, 1e-40f}, {1.0f, 0, 1.0f, 1.0f},
      {100.0f, 3}};
  for (SamplingParams params : settings) {
    for (uint64_t seed : {uint64_t(1), (uint64_t(1) << 40) + 5}) {
      for (int64_t position : {int64_t(0), int64_t(7), int64_t(1234567890123)}) {
        params.seed = seed;
        std::vector<SampleRow> rows;
        for (int64_t r = 0; r < n; ++r) rows.push_back({params, position + r});
        expect_sampled_as_host_and_alone(logits, rows);
      }
    }
  }
}

// A launch of rows that each sample by their own settings, over a 131,072-token vocabulary (the
// GPU spreads each row over many blocks and bins its tokens by distance below the top logit):
// flat and peaked rows, ties, greedy rows among sampled ones, and filters
// whose boundaries fall deep in the tail. Each id equals the host Sampler's, and the row's id
// when it is sampled alone.
TEST_F(CudaVsCpu, SampleRowsWithTheirOwnSettingsOverALargeVocabulary) {
  const int64_t vocab = 131072;
  const std::vector<SamplingParams> settings = {
      {1.0f},        {0.7f, 0, 0.9f}, {0.7f, 40, 1.0f, 0.05f}, {0.0f},          {1.0f, 100000},
      {2.0f, 0, 0.999f}, {0.6f, 0, 1.0f, 0.9f}, {1.0f, 0, 0.3f, 0.01f}, {0.9f, 5000, 0.95f}, {1e-3f}};
  const int64_t n = int64_t(settings.size());
  std::vector<float> host(size_t(n * vocab));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < vocab; ++i) {
      float v = normal(rng);
      if (r % 3 == 1) v = 4.0f * v - (i % 7 == 0 ? 0.0f : 12.0f);  // a peaked row: a few near the top
      if (r % 3 == 2) v = std::round(v * 27.0f) / 27.0f;            // ties, a few hundred a value
      if (r == 0 || r == 9) v *= 1e-3f;                              // flat: the bins spread finely
      host[size_t(r * vocab + i)] = v;
    }
  }
  Pair logits = make(DType::f32, {n, vocab}, host.data());
  for (int64_t position : {int64_t(3), int64_t(99)}) {
    std::vector<SampleRow> rows;
    for (int64_t r = 0; r < n; ++r) {
      SamplingParams params = settings[size_t(r)];
      params.seed = uint64_t(17 + r);
      rows.push_back({params, position + r});
    }
    expect_sampled_as_host_and_alone(logits, rows);
  }
}

// Rows whose candidate lists pass the sampler's list budget (256 MiB, about 5 rows of 2^20
// tokens) take their steps in chunks of rows: every row as on the host and as alone, whichever
// chunk it falls in, greedy rows among them.
TEST_F(CudaVsCpu, SampleRowsInChunksWhenTheirListsPassTheBudget) {
  const int64_t vocab = int64_t(1) << 20, n = 7;
  const std::vector<SamplingParams> settings = {{1.0f},          {0.7f, 0, 0.9f}, {0.0f}, {0.8f, 50, 1.0f, 0.02f},
                                                {1.0f, 0, 0.5f}, {1e-3f},         {1.5f, 0, 0.99f, 0.001f}};
  std::vector<float> host(size_t(n * vocab));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < vocab; ++i) {
      float v = normal(rng);
      if (r % 2 == 1) v = std::round(v * 27.0f) / 27.0f;  // ties
      host[size_t(r * vocab + i)] = r == 4 ? v * 1e-3f : v;
    }
  Pair logits = make(DType::f32, {n, vocab}, host.data());
  std::vector<SampleRow> rows;
  for (int64_t r = 0; r < n; ++r) {
    SamplingParams params = settings[size_t(r)];
    params.seed = uint64_t(5 + r);
    rows.push_back({params, 40 + r});
  }
  expect_sampled_as_host_and_alone(logits, rows);
}

// token_logprobs against the CPU's compute_logprobs: the same alternatives in the same order
// (ties to the lower id), values within float rounding (the GPU sums in another order), and a
// row's first alternatives the same whatever `top` the launch has.
TEST_F(CudaVsCpu, TokenLogprobsMatchTheHost) {
  const int64_t n = 5, vocab = 50021, top = 20;
  std::vector<float> host(size_t(n * vocab));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < vocab; ++i) {
      float v = normal(rng);
      if (r == 1) v = std::round(v * 2.0f) / 2.0f;  // many ties
      if (r == 2 && i % 5 == 0) v = -INFINITY;
      if (r == 3 && i == 4321) v = 30.0f;
      host[size_t(r * vocab + i)] = v;
    }
  Pair logits = make(DType::f32, {n, vocab}, host.data());
  Pair ids = ints({n}, {0, 17, 5, 4321, vocab - 1});
  Pair values = output(DType::f32, {n, 1 + top}), alternatives = output(DType::i32, {n, top});
  cpu.token_logprobs(logits.cpu, ids.cpu, values.cpu, alternatives.cpu);
  gpu->token_logprobs(logits.gpu, ids.gpu, values.gpu, alternatives.gpu);
  expect_equal_ids(alternatives, "token_logprobs ids");
  std::vector<float> want = floats(cpu, values.cpu), got = floats(*gpu, values.gpu);
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(want[i], got[i]) << "value " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i]))) << "value " << i;
  }
  Pair five_values = output(DType::f32, {n, 6}), five = output(DType::i32, {n, 5});
  gpu->token_logprobs(logits.gpu, ids.gpu, five_values.gpu, five.gpu);
  std::vector<float> all = floats(*gpu, alternatives.gpu), first = floats(*gpu, five.gpu);
  for (int64_t r = 0; r < n; ++r)
    EXPECT_EQ(0, std::memcmp(&all[size_t(r * top)], &first[size_t(r * 5)], 5 * 4)) << "row " << r << ", top 5";
}

// Two shapes: a small one, and Nemotron's (16 query heads on each KV head, head_dim 128).

}  // namespace
}  // namespace lockstep
