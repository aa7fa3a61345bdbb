// The prompt cache's contract with the real fixture models of every family, CPU and CUDA: a
// prompt resumed from any kind of cached prefix gets the ids it gets with the cache off (its
// alone run), greedy and seeded, alone and with other streams running.
#include "fixture_lanes.h"

namespace lockstep {
namespace {

using PromptCacheExactness = FixtureLanes;

LaneSettings cache_on(int32_t streams) {
  LaneSettings settings;
  settings.chunk_size = kChunk;
  settings.max_streams = streams;
  settings.prompt_cache = true;
  settings.host_bytes = size_t(1) << 30;
  settings.snapshot_every = 1;   // a snapshot at every cut
  settings.snapshot_slots = 4;   // on the device, then the host
  return settings;
}

TEST_P(PromptCacheExactness, EveryKindOfPrefixResumesToTheAloneIds) {
  ModelRunner runner(*model);
  LaneHost host(runner, cache_on(4));
  GenerateRequest base = requests(5, false, 41)[4];  // 300 tokens
  base.max_tokens = 8;
  LaneResult first;
  submit(host, base, first);
  run_until_idle(host);
  ASSERT_EQ(first.ids, alone(base));
  // Prompts sharing with it less than a page, exactly a cut, between cuts, all but the last
  // token, all of it, and all of it with its reply: greedy and seeded.
  std::mt19937 rng(5);
  std::vector<int32_t> replied = base.prompt;
  replied.insert(replied.end(), first.ids.begin(), first.ids.end());
  int64_t hits = 0;
  for (bool seeded : {false, true}) {
    for (int64_t shared : {5, 64, 100, 299, 300, 308}) {
      GenerateRequest request = base;
      request.prompt.assign(replied.begin(), replied.begin() + shared);
      for (int i = 0; i < 20; ++i) request.prompt.push_back(int32_t(rng() % uint32_t(model->info().vocab_size)));
      request.max_tokens = 6;
      if (seeded) request.sampling = {0.8f, 40, 0.95f, 0.0f, uint64_t(77 + shared)};
      LaneResult resumed;
      submit(host, request, resumed);
      run_until_idle(host);
      EXPECT_EQ(resumed.ids, alone(request)) << (seeded ? "seeded" : "greedy") << ", sharing " << shared;
      ASSERT_TRUE(resumed.end.has_value());
      EXPECT_LE(resumed.end->cached_tokens, shared);
      hits += resumed.end->cached_tokens > 0;
    }
  }
  EXPECT_EQ(hits, 10);  // every prefix but the one shorter than a page resumes
}

TEST_P(PromptCacheExactness, ConcurrentTurnsOfSeveralConversationsMatchTheAloneRuns) {
  ModelRunner runner(*model);
  LaneHost host(runner, cache_on(6));
  const GenerateRequest system = requests(5, false, 43)[4];  // a shared 300-token prefix
  std::mt19937 rng(9);
  std::vector<GenerateRequest> conversations(6);
  for (size_t c = 0; c < conversations.size(); ++c) {
    conversations[c].prompt = system.prompt;
    for (int i = 0; i < 10 + int(c) * 7; ++i)
      conversations[c].prompt.push_back(int32_t(rng() % uint32_t(model->info().vocab_size)));
    conversations[c].max_tokens = 5;
    conversations[c].ignore_eos = true;
    if (c % 2) conversations[c].sampling = {0.9f, 0, 1.0f, 0.0f, uint64_t(c)};
  }
  uint64_t cached = 0;
  for (int turn = 0; turn < 3; ++turn) {
    std::vector<LaneResult> results(conversations.size());
    for (size_t c = 0; c < conversations.size(); ++c) submit(host, conversations[c], results[c]);
    run_until_idle(host);
    for (size_t c = 0; c < conversations.size(); ++c) {
      ASSERT_EQ(results[c].ids, alone(conversations[c])) << "turn " << turn << ", conversation " << c;
      cached += uint64_t(results[c].end->cached_tokens);
      // The next turn: this prompt, its reply, and a new message.
      auto& prompt = conversations[c].prompt;
      prompt.insert(prompt.end(), results[c].ids.begin(), results[c].ids.end());
      for (int i = 0; i < 9; ++i) prompt.push_back(int32_t(rng() % uint32_t(model->info().vocab_size)));
    }
  }
  EXPECT_GT(cached, 0u);
  EXPECT_EQ(host.stats().cached_tokens, cached);
  EXPECT_EQ(host.stats().unreserved_pages, model->info().kv_pages);
}

TEST_P(PromptCacheExactness, PagesEvictedToHostMemoryResumeToTheAloneIds) {
  // 32 pages of 16: one 300-token conversation and not two, so the second pushes the first's
  // pages out to host memory, and the first's next turn copies them back.
  ModelOptions options;
  options.max_rows = 64;
  options.max_context = 512;
  options.kv_pages = 32;
  options.state_slots = 4;
  auto small = load_model(test_data(family), *backend, options);
  ASSERT_TRUE(small.ok()) << small.error().message;
  ModelRunner runner(**small);
  ASSERT_GT(runner.page_bytes(), 0u);
  LaneHost host(runner, cache_on(1));
  GenerateRequest first = requests(5, false, 47)[4], other = requests(5, true, 53)[4];  // 300 tokens each
  for (GenerateRequest* request : {&first, &other}) {
    LaneResult result;
    submit(host, *request, result);
    run_until_idle(host);
    ASSERT_EQ(result.ids, alone(*request));
    if (request == &first) first.prompt.insert(first.prompt.end(), result.ids.begin(), result.ids.end());
  }
  EXPECT_GT(host.stats().cache.host_pages, 0);
  for (int i = 0; i < 12; ++i) first.prompt.push_back(int32_t(7 * i + 3));
  first.max_tokens = 6;
  LaneResult next;
  submit(host, first, next);
  run_until_idle(host);
  EXPECT_EQ(next.ids, alone(first));
  ASSERT_TRUE(next.end.has_value());
  EXPECT_GT(next.end->cached_tokens, 0);
  EXPECT_GT(host.stats().cache.restored_pages, 0u);
}

INSTANTIATE_TEST_SUITE_P(Families, PromptCacheExactness, ::testing::ValuesIn(families_and_backends()),
                         backend_param_name);

}  // namespace
}  // namespace lockstep
