// Every family's fixtures against the Hugging Face transformers reference (float64): logits at
// every position within 2e-3, greedy tokens through the decode path (for Nemotron-H, the
// single-step recurrence) equal up to the first near-tie; and, for the Llama family, a prompt
// filled in any chunks, or decoded token by token, gives bit-identical logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/backend_factory.h"
#include "backend/cpu/cpu_backend.h"
#include "fixture_reference.h"
#include "runner/solo_run.h"
#include "models/registry.h"
#include "test_support.h"

namespace lockstep {
namespace {

struct FixtureParam {
  std::string model;
  std::string backend;
};

// How gtest prints a parameter in test names and CTest listings.
void PrintTo(const FixtureParam& param, std::ostream* out) { *out << param.model << " on " << param.backend; }

std::string param_name(const ::testing::TestParamInfo<FixtureParam>& info) {
  std::string name = info.param.model + "_" + info.param.backend;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

class FixtureTest : public ::testing::TestWithParam<FixtureParam> {
 protected:
  void SetUp() override {
    backend = make_test_backend(GetParam().backend);
    auto loaded = load_model(test_data(GetParam().model), *backend, ModelOptions{});
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    model = std::move(*loaded);
    auto ref = load_fixture_reference(test_data(GetParam().model) + "/reference.safetensors");
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    cases = std::move(*ref);
  }
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::vector<FixtureCase> cases;
};

TEST_P(FixtureTest, LogitsAtEveryPositionMatchReference) {
  ASSERT_EQ(cases.size(), 5u);
  for (const FixtureCase& c : cases) {
    SoloRun run(*model, 256);
    auto logits = run.prompt_logits(c.ids);
    ASSERT_TRUE(logits.ok()) << logits.error().message;
    ASSERT_EQ(logits->size(), c.logits.size());
    EXPECT_LE(max_abs_difference(*logits, c.logits), 2e-3) << "prompt of " << c.ids.size() << " tokens";
  }
}

TEST_P(FixtureTest, GreedyTokensMatchReferenceUpToFirstNearTie) {
  for (const FixtureCase& c : cases) {
    SoloRun run(*model, 256);
    GenerateRequest request;
    request.prompt = c.ids;
    request.max_tokens = int64_t(c.greedy.size());
    request.ignore_eos = true;  // the reference ran past end ids
    auto result = run.generate(request);
    ASSERT_TRUE(result.ok()) << result.error().message;
    size_t checked = greedy_steps_to_check(c.margins, 1e-3f);
    ASSERT_GE(result->tokens.size(), checked);
    for (size_t i = 0; i < checked; ++i)
      ASSERT_EQ(result->tokens[i], c.greedy[i]) << "step " << i << " of the " << c.ids.size() << "-token prompt";
  }
}

TEST_P(FixtureTest, ChunkedFillAndDecodeGiveBitIdenticalLogits) {
  // Mamba2's SSD pieces follow the chunks (see NemotronFixture.ChunkedFills...), on every
  // backend.
  if (GetParam().model.rfind("nemotron", 0) == 0)
    GTEST_SKIP() << "Mamba2's SSD pieces follow the chunks: see NemotronFixture.ChunkedFills...";
  const FixtureCase& c = cases[3];  // 130 tokens
  SoloRun whole(*model, 256);
  auto reference = whole.prompt_logits(c.ids);
  ASSERT_TRUE(reference.ok());
  for (int64_t chunk : {1, 7, 64}) {
    SoloRun chunked(*model, chunk);
    auto logits = chunked.prompt_logits(c.ids);
    ASSERT_TRUE(logits.ok());
    ASSERT_EQ(0, std::memcmp(reference->data(), logits->data(), reference->size() * 4)) << "chunk " << chunk;
  }
}

// Every family on the CPU kernel sets, and on the GPU where one is present.
std::vector<FixtureParam> fixture_params() {
  std::vector<FixtureParam> params = {{"llama", "cpu"},        {"qwen3", "cpu"},          {"llama", "cpu-generic"},
                                      {"qwen3", "cpu-1thread"}, {"nemotron_h", "cpu"},     {"nemotron_h_moe", "cpu"},
                                      {"nemotron_h", "cpu-generic"}};
  if (backend_usable("cuda"))
    for (const char* family : {"llama", "qwen3", "nemotron_h", "nemotron_h_moe"}) params.push_back({family, "cuda"});
  return params;
}

INSTANTIATE_TEST_SUITE_P(Families, FixtureTest, ::testing::ValuesIn(fixture_params()), param_name);

}  // namespace
}  // namespace lockstep
