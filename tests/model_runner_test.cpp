// ModelRunner, the real StepRunner: the ids it picks on the backend are the host Sampler's on
// the same logits, logprobs come only for the rows that ask, and a bad plan changes nothing.
#include <gtest/gtest.h>

#include "backend/backend_factory.h"
#include "memory/kv_pages.h"
#include "models/registry.h"
#include "runner/model_runner.h"
#include "runner/solo_run.h"
#include "test_support.h"

namespace lockstep {
namespace {

class ModelRunnerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend = make_test_backend("cpu");
    ModelOptions options;
    options.max_rows = 64;
    options.max_context = 128;
    auto loaded = load_model(test_data(GetParam()), *backend, options);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    model = std::move(*loaded);
  }

  // A plan filling `prompt` in one pass from position 0, picking its last row's token twice:
  // once greedy and once seeded, the second with logprobs.
  StepPlan fill_plan_of(const std::vector<int32_t>& prompt, const PageTable& table) {
    StepPlan plan;
    plan.batch.seq_pages.push_back(&table);
    if (model->info().state_slots > 0) plan.batch.seq_slots.push_back(0);
    for (size_t p = 0; p < prompt.size(); ++p) {
      plan.batch.tokens.push_back(prompt[p]);
      plan.batch.positions.push_back(int32_t(p));
      plan.batch.row_seq.push_back(0);
    }
    const int32_t last = int32_t(prompt.size()) - 1;
    plan.batch.logit_rows = {last, last};
    plan.samples = {{SamplingParams{}, int64_t(prompt.size())}, {seeded, int64_t(prompt.size())}};
    plan.top_logprobs = {-1, 5};
    return plan;
  }

  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  SamplingParams seeded{1.0f, 0, 1.0f, 0.0f, 77};
};

TEST_P(ModelRunnerTest, IdsAreTheHostSamplersAndLogprobsOnlyWhereAsked) {
  const std::vector<int32_t> prompt = {3, 14, 15, 9, 2, 6, 5};
  const int64_t vocab = model->info().vocab_size;
  std::vector<float> reference;
  {
    SoloRun solo(*model, 64);
    auto logits = solo.prompt_logits(prompt);
    ASSERT_TRUE(logits.ok()) << logits.error().message;
    reference.assign(logits->end() - vocab, logits->end());
  }
  KvPagePool pages(model->info().kv_pages, model->info().page_size);
  PageTable table;
  ASSERT_TRUE(pages.grow(table, int64_t(prompt.size())));
  ModelRunner runner(*model);
  StepResult result;
  ASSERT_TRUE(runner.run(fill_plan_of(prompt, table), result).ok());
  Sampler sampler{int(vocab)};
  ASSERT_EQ(result.ids.size(), 2u);
  EXPECT_EQ(result.ids[0], sampler.sample(reference.data(), SamplingParams{}, int64_t(prompt.size())));
  EXPECT_EQ(result.ids[1], sampler.sample(reference.data(), seeded, int64_t(prompt.size())));
  TokenLogprobs expected;
  compute_logprobs(reference.data(), vocab, result.ids[1], 5, expected);
  EXPECT_EQ(result.logprobs[1].id, expected.id);
  EXPECT_EQ(result.logprobs[1].logprob, expected.logprob);
  EXPECT_EQ(result.logprobs[1].top, expected.top);
}

TEST_P(ModelRunnerTest, RefusesAPlanWhoseAsksDoNotMatchItsLogitRows) {
  KvPagePool pages(model->info().kv_pages, model->info().page_size);
  PageTable table;
  ASSERT_TRUE(pages.grow(table, 4));
  ModelRunner runner(*model);
  StepResult result;
  StepPlan plan = fill_plan_of({1, 2, 3, 4}, table);
  plan.top_logprobs.pop_back();
  EXPECT_FALSE(runner.run(plan, result).ok());
  plan = fill_plan_of({1, 2, 3, 4}, table);
  plan.samples[0].params.top_p = 2.0f;
  Status refused = runner.run(plan, result);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("top_p"), std::string::npos);
  plan = fill_plan_of({1, 2, 3, int32_t(model->info().vocab_size)}, table);
  EXPECT_FALSE(runner.run(plan, result).ok());
}

INSTANTIATE_TEST_SUITE_P(Families, ModelRunnerTest, ::testing::Values("llama", "nemotron_h"));

}  // namespace
}  // namespace lockstep
