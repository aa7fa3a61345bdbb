// Rounds of 128 and 1,024 streams (issue 27's widths) through the lane host with the fixture
// models: each stream's ids, greedy or seeded, equal its alone run. On the GPU such rounds take
// the kernels' wide paths (the tiled matmul from 256 rows, grouped experts of many rows,
// attention split across rows), which the narrower LanesExactness rounds never reach.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "backend/backend_factory.h"
#include "lanes/lane_host.h"
#include "models/registry.h"
#include "runner/model_runner.h"
#include "runner/solo_run.h"
#include "test_support.h"

namespace lockstep {
namespace {

constexpr int64_t kChunk = 64;
constexpr int kMostStreams = 1024;

class WideRounds : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& param = GetParam();
    const size_t at = param.find('@');
    backend = make_test_backend(at == std::string::npos ? "cpu" : param.substr(at + 1));
    const std::string family = param.substr(0, at);
    ModelOptions wide;
    wide.max_rows = kMostStreams + kChunk;
    wide.max_context = 256;
    wide.kv_pages = kMostStreams * 8;  // 128 positions a stream, in pages of 16
    wide.state_slots = kMostStreams;
    auto loaded = load_model(test_data(family), *backend, wide);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    model = std::move(*loaded);
    ModelOptions alone;
    alone.max_rows = kChunk;
    alone.max_context = 256;
    auto reference = load_model(test_data(family), *backend, alone);
    ASSERT_TRUE(reference.ok()) << reference.error().message;
    solo_model = std::move(*reference);
  }

  // Prompts of 1 to 24 tokens, replies of 48 to 54 (longer than all the fills take, so the
  // rounds reach every stream); every other stream samples.
  std::vector<GenerateRequest> requests(int count) {
    std::vector<GenerateRequest> out;
    const int32_t vocab = int32_t(model->info().vocab_size);
    for (int i = 0; i < count; ++i) {
      GenerateRequest request;
      const int length = 1 + (i * 37) % 24;
      for (int t = 0; t < length; ++t) request.prompt.push_back(int32_t((i * 7919 + t * 104729) % vocab));
      request.max_tokens = 48 + i % 7;
      request.ignore_eos = true;
      if (i % 2 == 1) request.sampling = {0.9f, 50, 0.95f, 0.0f, uint64_t(4242 + i)};
      out.push_back(request);
    }
    return out;
  }

  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model, solo_model;
};

TEST_P(WideRounds, RoundsOf128And1024StreamsMatchTheAloneRuns) {
  const std::vector<GenerateRequest> all = requests(kMostStreams);
  std::vector<std::vector<int32_t>> expected;
  for (const GenerateRequest& request : all) {
    SoloRun run(*solo_model, kChunk);
    auto result = run.generate(request);
    ASSERT_TRUE(result.ok()) << result.error().message;
    expected.push_back(result->tokens);
  }
  for (int streams : {128, kMostStreams}) {
    ModelRunner runner(*model);
    LaneHost host(runner, {kChunk, streams, kMostStreams});
    std::vector<std::vector<int32_t>> ids(static_cast<size_t>(streams));
    std::vector<std::optional<StreamEnd>> ends(static_cast<size_t>(streams));
    std::vector<StreamHandle> handles;
    for (int i = 0; i < streams; ++i) {
      auto submitted = host.submit(all[size_t(i)], {[&ids, i](int32_t id) { ids[size_t(i)].push_back(id); },
                                                    [&ends, i](const StreamEnd& end) { ends[size_t(i)] = end; }});
      ASSERT_TRUE(submitted.handle.has_value()) << submitted.error->message;
      handles.push_back(*submitted.handle);
    }
    uint64_t widest = 0;  // rows of the widest round
    for (bool more = true; more;) {
      const LaneStats before = host.stats();
      more = host.step();
      const LaneStats after = host.stats();
      if (after.rounds > before.rounds)
        widest = std::max(widest, (after.round_rows - before.round_rows) / (after.rounds - before.rounds));
    }
    EXPECT_EQ(widest, uint64_t(streams)) << "the widest round";
    for (int i = 0; i < streams; ++i) {
      ASSERT_TRUE(ends[size_t(i)].has_value()) << "stream " << i << " of " << streams << " did not end";
      ASSERT_EQ(ids[size_t(i)], expected[size_t(i)]) << "stream " << i << " of " << streams;
    }
  }
}

std::vector<std::string> wide_params() {
  std::vector<std::string> out = {"llama", "nemotron_h_moe"};
  if (backend_usable("cuda")) out.insert(out.end(), {"llama@cuda", "nemotron_h@cuda", "nemotron_h_moe@cuda"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Families, WideRounds, ::testing::ValuesIn(wide_params()), backend_param_name);

}  // namespace
}  // namespace lockstep
