// Exactness through the lane host with the real fixture models of every family: each stream's
// ids, at any concurrency, greedy or seeded, equal its alone run, bit for bit.
#include <gtest/gtest.h>

#include <random>

#include "backend/backend_factory.h"
#include "lanes/lane_host.h"
#include "models/registry.h"
#include "runner/model_runner.h"
#include "runner/solo_run.h"
#include "test_support.h"

namespace lockstep {
namespace {

constexpr int64_t kChunk = 64;

struct Result {
  std::vector<int32_t> ids;
  std::optional<StreamEnd> end;
};

class LanesExactness : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    // A parameter is a fixture family, with "@cuda" to run it on the GPU.
    const std::string& param = GetParam();
    size_t at = param.find('@');
    backend = make_test_backend(at == std::string::npos ? "cpu" : param.substr(at + 1));
    family = param.substr(0, at);
    ModelOptions options;
    options.max_rows = 64;
    options.max_context = 512;
    options.kv_pages = 24 * 32;
    options.state_slots = 24;
    auto loaded = load_model(test_data(family), *backend, options);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    model = std::move(*loaded);
  }

  // Requests with prompt lengths from 1 to 300 and varied max_tokens; seeded ones sample.
  std::vector<GenerateRequest> requests(int count, bool seeded, uint32_t salt) {
    std::mt19937 rng(salt);
    const int64_t lengths[] = {1, 5, 37, 130, 300, 64, 65, 12};
    std::vector<GenerateRequest> out;
    for (int i = 0; i < count; ++i) {
      GenerateRequest request;
      int64_t length = lengths[size_t(i) % 8] + (i / 8);
      for (int64_t t = 0; t < length; ++t) request.prompt.push_back(int32_t(rng() % uint32_t(model->info().vocab_size)));
      request.max_tokens = 4 + i % 9;
      request.ignore_eos = true;
      if (seeded) request.sampling = {0.8f, 40, 0.95f, 0.0f, uint64_t(1234 + i)};
      out.push_back(request);
    }
    return out;
  }

  std::vector<int32_t> alone(const GenerateRequest& request) {
    SoloRun run(*model, kChunk);
    auto result = run.generate(request);
    EXPECT_TRUE(result.ok()) << result.error().message;
    return result.ok() ? result->tokens : std::vector<int32_t>{};
  }

  void submit(LaneHost& host, const GenerateRequest& request, Result& result) {
    auto submitted = host.submit(request, {[&result](int32_t id) { result.ids.push_back(id); },
                                           [&result](const StreamEnd& end) { result.end = end; }});
    ASSERT_TRUE(submitted.handle.has_value()) << submitted.error->message;
    handles.push_back(*submitted.handle);
  }

  static void run_until_idle(LaneHost& host) {
    while (host.step()) {
    }
  }

  std::string family;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::vector<StreamHandle> handles;
};

TEST_P(LanesExactness, EveryConcurrencyLevelMatchesTheAloneRuns) {
  for (bool seeded : {false, true}) {
    std::vector<GenerateRequest> all = requests(24, seeded, seeded ? 7 : 3);
    std::vector<std::vector<int32_t>> expected;
    for (const auto& request : all) expected.push_back(alone(request));
    for (int streams : {1, 2, 4, 8, 24}) {
      ModelRunner runner(*model);
      LaneHost host(runner, {kChunk, streams, 64});
      std::vector<Result> results(static_cast<size_t>(streams));
      for (int i = 0; i < streams; ++i) submit(host, all[size_t(i)], results[size_t(i)]);
      run_until_idle(host);
      for (int i = 0; i < streams; ++i)
        ASSERT_EQ(results[size_t(i)].ids, expected[size_t(i)])
            << (seeded ? "seeded" : "greedy") << ", stream " << i << " of " << streams;
    }
  }
}

// Greedy and sampled rows in one round, with a stream that wants logprobs (token_logprobs on the
// backend): every stream still gets its alone run's ids.
TEST_P(LanesExactness, RoundsMixingGreedySampledAndLogprobStreamsMatchAloneRuns) {
  std::vector<GenerateRequest> greedy = requests(6, false, 23), seeded = requests(6, true, 29);
  std::vector<GenerateRequest> all;
  for (int i = 0; i < 6; ++i) all.push_back(i % 2 ? seeded[size_t(i)] : greedy[size_t(i)]);
  all[2].top_logprobs = 2;  // greedy, and asks for logprobs
  ModelRunner runner(*model);
  LaneHost host(runner, {kChunk, 6, 64});
  std::vector<Result> results(all.size());
  for (size_t i = 0; i < all.size(); ++i) submit(host, all[i], results[i]);
  run_until_idle(host);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(results[i].ids, alone(all[i])) << "stream " << i;
}

TEST_P(LanesExactness, ALongPromptArrivingMidDecodeChangesNothing) {
  std::vector<GenerateRequest> all = requests(6, true, 11);
  GenerateRequest long_prompt = requests(5, false, 13)[4];  // 300 tokens
  long_prompt.max_tokens = 6;
  ModelRunner runner(*model);
  LaneHost host(runner, {kChunk, 8, 64});
  std::vector<Result> results(6);
  Result late;
  for (int i = 0; i < 6; ++i) submit(host, all[size_t(i)], results[size_t(i)]);
  for (int i = 0; i < 12; ++i) host.step();  // the others are decoding now
  submit(host, long_prompt, late);
  run_until_idle(host);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(results[size_t(i)].ids, alone(all[size_t(i)])) << "stream " << i;
  EXPECT_EQ(late.ids, alone(long_prompt));
}

TEST_P(LanesExactness, AStreamCancelledMidFillAndResentGivesTheSameIds) {
  GenerateRequest long_prompt = requests(5, true, 17)[4];
  GenerateRequest other = requests(2, true, 19)[1];
  ModelRunner runner(*model);
  LaneHost host(runner, {kChunk, 8, 64});
  Result cancelled, neighbour, resent;
  submit(host, other, neighbour);
  submit(host, long_prompt, cancelled);
  for (int i = 0; i < 4; ++i) host.step();
  handles.back().cancel();
  host.step();
  ASSERT_TRUE(cancelled.end.has_value());
  EXPECT_EQ(cancelled.end->kind, StreamEnd::Kind::cancelled);
  submit(host, long_prompt, resent);
  run_until_idle(host);
  EXPECT_EQ(resent.ids, alone(long_prompt));
  EXPECT_EQ(neighbour.ids, alone(other));
}

std::vector<std::string> families_and_backends() {
  std::vector<std::string> out = {"llama", "qwen3", "nemotron_h", "nemotron_h_moe"};
  if (backend_usable("cuda"))
    for (const char* family : {"llama", "qwen3", "nemotron_h", "nemotron_h_moe"}) out.push_back(std::string(family) + "@cuda");
  return out;
}

INSTANTIATE_TEST_SUITE_P(Families, LanesExactness, ::testing::ValuesIn(families_and_backends()),
                         backend_param_name);

}  // namespace
}  // namespace lockstep
