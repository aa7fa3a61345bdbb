// Tensor parallel with simulated ranks (ModelOptions::tensor_parallel; issue 28): every family's
// fixtures split over ranks still match the transformers reference (Llama and Qwen3 by KV head
// and MLP width, and at 4 ranks with a KV head repeated on two ranks; Nemotron-H's Mamba2 by head
// group, its attention, MLP and each expert by width; every family's LM head by vocabulary,
// whose joined logits keep the whole head's bits), and a split that does not divide is refused
// with a message that names it. (That replies at two ranks equal the same requests
// alone, at every concurrency, greedy and seeded, is LanesExactness and PromptCacheExactness
// with the "+tp2" families, and DraftsExactness with "nemotron_h_mtp+tp2" for an MTP head's
// split layers.)
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "fixture_reference.h"
#include "models/registry.h"
#include "models/vocab_head.h"
#include "op_test_data.h"
#include "runner/solo_run.h"
#include "test_support.h"

namespace lockstep {
namespace {

// The LM head by vocabulary: the ranks' rows cover the vocabulary in whole tiles of 16.
TEST(TensorParallelHead, RanksCoverTheVocabularyInTiles) {
  for (const int64_t vocab : {int64_t(512), int64_t(131072), int64_t(151936), int64_t(1000), int64_t(20)}) {
    for (const int64_t ranks : {1, 2, 3, 4, 8}) {
      EXPECT_EQ(VocabHead::first(vocab, ranks, 0), 0);
      EXPECT_EQ(VocabHead::first(vocab, ranks, ranks), vocab);
      for (int64_t r = 1; r < ranks; ++r) {
        const int64_t at = VocabHead::first(vocab, ranks, r);
        EXPECT_LE(VocabHead::first(vocab, ranks, r - 1), at) << vocab << " over " << ranks;
        if (vocab >= 16 * ranks) {
          EXPECT_EQ(at % 16, 0) << vocab << " over " << ranks << ", rank " << r;
        }
      }
    }
  }
}

// Each rank's logits joined by columns have the bits of the whole head's: a logit is one dot
// product, which no rank cuts. f32 and bf16 weights (prepared for matmuls, packed on the GPU),
// 1 and 7 rows, 2 to 4 ranks.
class TensorParallelHeadOnBackend : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallelHeadOnBackend, JoinedLogitsEqualTheWholeHead) {
  std::unique_ptr<Backend> backend = make_test_backend(GetParam());
  if (!backend) GTEST_SKIP() << "no CUDA device";
  const int64_t vocab = 200, hidden = 96;
  std::mt19937 rng(28);
  const std::vector<float> w = normal_floats(rng, vocab * hidden, 0.1f);
  for (const DType dtype : {DType::f32, DType::bf16}) {
    // The head's rows [begin, end) as a prepared matmul weight.
    auto rows_of_head = [&](int64_t begin, int64_t end) {
      const std::vector<float> part(w.begin() + begin * hidden, w.begin() + end * hidden);
      OwnedTensor t;
      if (dtype == DType::f32) {
        t = to_backend(*backend, dtype, {end - begin, hidden}, part);
      } else {
        std::vector<uint16_t> bits(part.size());
        for (size_t i = 0; i < part.size(); ++i) {
          uint32_t u;
          std::memcpy(&u, &part[i], 4);
          bits[i] = uint16_t(u >> 16);
        }
        t = to_backend(*backend, dtype, {end - begin, hidden}, bits);
      }
      backend->prepare_matmul_weight(t);
      return t;
    };
    const OwnedTensor whole = rows_of_head(0, vocab);
    for (const int64_t n : {1, 7}) {
      const OwnedTensor x = to_backend(*backend, DType::f32, {n, hidden}, normal_floats(rng, n * hidden));
      const OwnedTensor expected = backend->alloc(DType::f32, {n, vocab});
      backend->matmul(x, whole, expected);
      for (const int64_t ranks : {2, 3, 4}) {
        std::vector<OwnedTensor> parts, logits;
        std::vector<Tensor> views;
        for (int64_t r = 0; r < ranks; ++r) {
          const int64_t begin = VocabHead::first(vocab, ranks, r), end = VocabHead::first(vocab, ranks, r + 1);
          parts.push_back(rows_of_head(begin, end));
          logits.push_back(backend->alloc(DType::f32, {n, end - begin}));
          backend->matmul(x, parts.back(), logits.back());
          views.push_back(logits.back().view());
        }
        const OwnedTensor joined = backend->alloc(DType::f32, {n, vocab});
        backend->join_columns(views, joined);
        const std::vector<float> got = to_host(*backend, joined), want = to_host(*backend, expected);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
            << (dtype == DType::f32 ? "f32" : "bf16") << ", " << n << " rows, " << ranks << " ranks";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, TensorParallelHeadOnBackend, ::testing::ValuesIn(test_backend_names()),
                         backend_param_name);

// A parameter: a fixture family and the ranks, "llama+tp2".
class TensorParallel : public ::testing::TestWithParam<std::string> {};

// Each fixture prompt's logits at several ranks within the reference's tolerance, and against
// one rank: the row-parallel sums are cut at other places, so the bits may differ (they do for
// these fixtures), but not by more than the tolerance.
TEST_P(TensorParallel, RanksMatchTheReference) {
  const std::string family = GetParam().substr(0, GetParam().find('+'));
  std::unique_ptr<Backend> backend = make_test_backend("cpu");
  ModelOptions one, split_options;
  split_options.tensor_parallel = std::stoi(GetParam().substr(GetParam().find("+tp") + 3));
  auto whole = load_model(test_data(family), *backend, one);
  auto split = load_model(test_data(family), *backend, split_options);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  ASSERT_TRUE(split.ok()) << split.error().message;
  auto cases = load_fixture_reference(test_data(family) + "/reference.safetensors");
  ASSERT_TRUE(cases.ok()) << cases.error().message;
  bool any_differs = false;
  for (const FixtureCase& c : *cases) {
    SoloRun run_whole(**whole, 256), run_split(**split, 256);
    auto logits_whole = run_whole.prompt_logits(c.ids);
    auto logits_split = run_split.prompt_logits(c.ids);
    ASSERT_TRUE(logits_whole.ok() && logits_split.ok());
    EXPECT_LE(max_abs_difference(*logits_split, c.logits), 2e-3) << "prompt of " << c.ids.size() << " tokens";
    EXPECT_LE(max_abs_difference(*logits_split, *logits_whole), 1e-4) << "prompt of " << c.ids.size() << " tokens";
    any_differs = any_differs || *logits_split != *logits_whole;
  }
  RecordProperty("ranks_bit_identical_to_one", any_differs ? "no" : "yes");
}

INSTANTIATE_TEST_SUITE_P(Families, TensorParallel,
                         ::testing::Values("llama+tp2", "qwen3+tp2", "llama+tp4", "qwen3+tp4", "nemotron_h+tp2",
                                           "nemotron_h_moe+tp2"),
                         backend_param_name);

TEST(TensorParallelRefusal, RanksThatDoNotDivideTheHeadsAreNamed) {
  CpuBackend backend(1);
  ModelOptions options;
  options.tensor_parallel = 3;  // the llama fixture has 8 heads and 2 KV heads
  auto model = load_model(test_data("llama"), backend, options);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("tensor parallel 3"), std::string::npos) << model.error().message;
  EXPECT_NE(model.error().message.find("2 KV heads"), std::string::npos) << model.error().message;
}

TEST(TensorParallelRefusal, RanksThatDoNotDivideTheMambaGroupsAreNamed) {
  CpuBackend backend(1);
  ModelOptions options;
  options.tensor_parallel = 4;  // the nemotron_h fixture has 2 Mamba2 groups
  auto model = load_model(test_data("nemotron_h"), backend, options);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("tensor parallel 4"), std::string::npos) << model.error().message;
  EXPECT_NE(model.error().message.find("2 Mamba2 groups do not divide among 4 ranks"), std::string::npos)
      << model.error().message;
}

TEST(TensorParallelRefusal, NoRanksIsRefused) {
  CpuBackend backend(1);
  ModelOptions options;
  options.tensor_parallel = 0;
  for (const char* family : {"llama", "nemotron_h"}) {
    auto model = load_model(test_data(family), backend, options);
    ASSERT_FALSE(model.ok()) << family;
    EXPECT_NE(model.error().message.find("needs one rank or more"), std::string::npos) << model.error().message;
  }
}

}  // namespace
}  // namespace lockstep
