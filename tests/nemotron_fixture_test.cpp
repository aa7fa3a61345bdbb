// The Nemotron-H fixtures (dense and MoE) against the transformers reference: logits at every
// position, greedy tokens through the single-step recurrence, and fills in chunks.
#include <gtest/gtest.h>

#include <cstring>

#include "fixture_reference.h"
#include "lanes/solo_run.h"
#include "models/registry.h"
#include "test_support.h"

namespace lockstep {
namespace {

class NemotronFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend = make_test_backend("cpu");
    auto loaded = load_model(test_data(GetParam()), *backend, ModelOptions{});
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    model = std::move(*loaded);
    auto ref = load_fixture_reference(test_data(GetParam()) + "/reference.safetensors");
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    cases = std::move(*ref);
  }
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::vector<FixtureCase> cases;
};

TEST_P(NemotronFixture, LogitsAtEveryPositionMatchReference) {
  ASSERT_EQ(cases.size(), 5u);
  for (const FixtureCase& c : cases) {
    SoloRun run(*model, 512);
    auto logits = run.prompt_logits(c.ids);
    ASSERT_TRUE(logits.ok()) << logits.error().message;
    EXPECT_LE(max_abs_difference(*logits, c.logits), 2e-3) << "prompt of " << c.ids.size() << " tokens";
  }
}

TEST_P(NemotronFixture, GreedyTokensThroughTheRecurrenceMatchReference) {
  for (const FixtureCase& c : cases) {
    SoloRun run(*model, 512);
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

TEST_P(NemotronFixture, ChunkedFillsStayWithinToleranceAndRepeatBitForBit) {
  const FixtureCase& c = cases[4];  // 300 tokens: crosses Mamba chunks
  SoloRun whole(*model, 512);
  auto reference = whole.prompt_logits(c.ids);
  ASSERT_TRUE(reference.ok());
  for (int64_t chunk : {64, 128, 1}) {
    SoloRun chunked(*model, chunk);
    auto first = chunked.prompt_logits(c.ids);
    auto second = chunked.prompt_logits(c.ids);
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_LE(max_abs_difference(*first, *reference), 2e-3) << "chunk " << chunk;
    EXPECT_LE(max_abs_difference(*first, c.logits), 2e-3) << "chunk " << chunk;
    ASSERT_EQ(0, std::memcmp(first->data(), second->data(), first->size() * 4)) << "chunk " << chunk;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NemotronFixture, ::testing::Values("nemotron_h", "nemotron_h_moe"));

}  // namespace
}  // namespace lockstep
