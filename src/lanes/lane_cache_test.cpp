// The prompt cache in the lane host, with the recording fake: its ids are right only when the
// pages and the state a stream reads hold exactly its own prefix, so every test here checks
// ids against a stream alone as well as where the fill resumed.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "lanes/lane_host.h"
#include "lanes/lane_test_support.h"
#include "lanes/recording_runner.h"

namespace lockstep {
namespace {

constexpr int64_t kVocab = 97;
constexpr int64_t kChunk = 32;

std::vector<int32_t> tokens_of(int64_t length, int32_t first) {
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < length; ++i) tokens.push_back(int32_t((first + i * 13) % kVocab));
  return tokens;
}

GenerateRequest request_of(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerateRequest request;
  request.prompt = std::move(prompt);
  request.max_tokens = max_tokens;
  request.ignore_eos = true;
  return request;
}

std::vector<int32_t> alone_ids(const GenerateRequest& request) { return RecordingRunner::alone_ids(request, kVocab); }

// Runs one request alone to its end; returns its outcome and the position its fill began at.
struct Served {
  Outcome outcome;
  int32_t first_filled = -1;
};
Served run_one(LaneHost& host, RecordingRunner& runner, const GenerateRequest& request) {
  Served run;
  const size_t calls = runner.calls.size();
  submit(host, request, run.outcome);
  run_until_idle(host);
  if (runner.calls.size() > calls) run.first_filled = runner.calls[calls].positions.front();
  EXPECT_TRUE(run.outcome.end.has_value());
  return run;
}

LaneSettings cached_settings(int32_t max_streams = 4) {
  LaneSettings settings;
  settings.chunk_size = kChunk;
  settings.max_streams = max_streams;
  settings.max_queue = 64;
  settings.prompt_cache = true;
  settings.host_bytes = 1 << 20;
  settings.snapshot_every = 2;
  return settings;
}

// Both kinds of model: attention only (no state slots), and with recurrent state.
class LaneCacheTest : public ::testing::TestWithParam<bool> {
 protected:
  bool keeps_state() const { return GetParam(); }
  RecordingRunner runner{kVocab, /*max_rows=*/64, /*max_context=*/1024, /*page_size=*/16, /*kv_pages=*/256,
                       /*state_slots=*/keeps_state() ? 4 : 0};
};

TEST_P(LaneCacheTest, TheSamePromptAgainResumesAndGetsTheSameIds) {
  LaneHost host(runner, cached_settings());
  const GenerateRequest request = request_of(tokens_of(100, 1), 5);
  Served cold = run_one(host, runner, request);
  EXPECT_EQ(cold.first_filled, 0);
  EXPECT_EQ(cold.outcome.end->cached_tokens, 0);
  Served warm = run_one(host, runner, request);
  EXPECT_EQ(warm.outcome.ids, alone_ids(request));
  // State: the snapshot at the prompt's last cut (96). Attention: whole pages below the last
  // prompt position, which the fill needs for the first token's logits.
  EXPECT_EQ(warm.first_filled, 96);
  EXPECT_EQ(warm.outcome.end->cached_tokens, 96);
  if (keeps_state()) {
    ASSERT_EQ(runner.loads.size(), 1u);
    EXPECT_EQ(runner.loads[0].position, 96);
  }
  LaneStats stats = host.stats();
  EXPECT_EQ(stats.cache_lookups, 2u);
  EXPECT_EQ(stats.cache_hits, 1u);
  EXPECT_EQ(stats.cached_tokens, 96u);
}

TEST_P(LaneCacheTest, ANextTurnResumesFromThePreviousTurn) {
  LaneHost host(runner, cached_settings());
  GenerateRequest turn = request_of(tokens_of(70, 3), 20);
  Served first = run_one(host, runner, turn);
  ASSERT_EQ(first.outcome.ids, alone_ids(turn));
  // The next prompt: the last one, its reply, and a new message.
  std::vector<int32_t> next = turn.prompt;
  next.insert(next.end(), first.outcome.ids.begin(), first.outcome.ids.end());
  for (int32_t token : tokens_of(25, 40)) next.push_back(token);
  GenerateRequest second = request_of(next, 6);
  Served resumed = run_one(host, runner, second);
  EXPECT_EQ(resumed.outcome.ids, alone_ids(second));
  // State: the first prompt's last cut, 64. Attention: every whole page the first turn wrote
  // (its 70 + 20 positions, less the last id, which was never fed back): 80.
  const int64_t expected = keeps_state() ? 64 : 80;
  EXPECT_EQ(resumed.first_filled, expected);
  EXPECT_EQ(resumed.outcome.end->cached_tokens, expected);
}

TEST_P(LaneCacheTest, EveryKindOfPrefixGivesTheAloneIds) {
  LaneHost host(runner, cached_settings());
  const std::vector<int32_t> base = tokens_of(200, 7);
  run_one(host, runner, request_of(base, 3));
  // Prompts that share with it less than a page, exactly a cut, between cuts, all of it, and
  // more than all of it.
  for (int64_t shared : {5, 16, 32, 40, 64, 100, 199, 200}) {
    std::vector<int32_t> prompt(base.begin(), base.begin() + shared);
    for (int32_t token : tokens_of(30, int32_t(shared))) prompt.push_back(token);
    GenerateRequest request = request_of(prompt, 4);
    request.sampling.temperature = 0.7f;
    request.sampling.seed = uint64_t(shared);
    Served run = run_one(host, runner, request);
    EXPECT_EQ(run.outcome.ids, alone_ids(request)) << "sharing " << shared;
    EXPECT_LE(run.outcome.end->cached_tokens, shared) << "sharing " << shared;
    EXPECT_EQ(run.first_filled, run.outcome.end->cached_tokens);
  }
}

TEST_P(LaneCacheTest, ACancelledFillResumesFromItsLastLandedChunk) {
  LaneHost host(runner, cached_settings());
  const GenerateRequest request = request_of(tokens_of(300, 11), 4);
  Outcome cancelled;
  StreamHandle handle = submit(host, request, cancelled);
  for (int i = 0; i < 3; ++i) host.step();  // three chunks land: positions 0 to 95
  handle.cancel();
  run_until_idle(host);
  ASSERT_EQ(cancelled.end->kind, StreamEnd::Kind::cancelled);
  Served resent = run_one(host, runner, request);
  EXPECT_EQ(resent.outcome.ids, alone_ids(request));
  EXPECT_EQ(resent.first_filled, 96);
  EXPECT_EQ(resent.outcome.end->cached_tokens, 96);
}

TEST_P(LaneCacheTest, StreamsRunningTogetherShareAPrefixAndItsPages) {
  LaneHost host(runner, cached_settings());
  const std::vector<int32_t> system = tokens_of(128, 5);
  std::vector<int32_t> a = system, b = system;
  for (int32_t token : tokens_of(10, 60)) a.push_back(token);
  for (int32_t token : tokens_of(12, 70)) b.push_back(token);
  Outcome first, second;
  submit(host, request_of(a, 40), first);
  while (first.ids.empty()) host.step();  // a's prompt is filled and cached; a decodes on
  submit(host, request_of(b, 30), second);
  const LaneStats before = host.stats();
  run_until_idle(host);
  EXPECT_EQ(first.ids, alone_ids(request_of(a, 40)));
  EXPECT_EQ(second.ids, alone_ids(request_of(b, 30)));
  EXPECT_EQ(second.end->cached_tokens, 128);
  EXPECT_EQ(before.cache_hits, 0u);
  // At the end every page is free or cached, none reserved.
  const LaneStats after = host.stats();
  EXPECT_EQ(after.unreserved_pages, 256);
  EXPECT_EQ(after.active, 0);
}

TEST_P(LaneCacheTest, StreamsAdmittedTogetherFillASharedPrefixOnce) {
  LaneHost host(runner, cached_settings());
  const std::vector<int32_t> system = tokens_of(128, 9);
  std::vector<std::vector<int32_t>> prompts(3, system);
  for (size_t i = 0; i < prompts.size(); ++i)
    for (int32_t token : tokens_of(10 + int64_t(i), int32_t(50 + 10 * i))) prompts[i].push_back(token);
  std::vector<Outcome> outcomes(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) submit(host, request_of(prompts[i], 6), outcomes[i]);
  run_until_idle(host);
  // The oldest fills the shared prefix; the others, admitted with it, resume from what it
  // cached instead of filling it again.
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(outcomes[i].ids, alone_ids(request_of(prompts[i], 6))) << "stream " << i;
    EXPECT_EQ(outcomes[i].end->cached_tokens, i == 0 ? 0 : 128) << "stream " << i;
  }
  int64_t filled = 0;
  for (const auto& call : runner.calls)
    if (call.tokens.size() > 1 || call.positions.front() < int32_t(prompts[0].size())) filled += int64_t(call.tokens.size());
  EXPECT_LT(filled, 128 + 3 * 40);  // the prefix once, and each stream's own tokens
  EXPECT_EQ(host.stats().unreserved_pages, 256);
}

TEST_P(LaneCacheTest, AStreamThatResumesIntoItsLastChunkCountsItsDrawAgainstTheLogitRows) {
  // Passes of 33 logit rows: a stream scored for its prompt logprobs takes 32 a chunk, the
  // sharer's last chunk 1. The third stream waits for the sharer's prefix, then resumes into its
  // own last chunk, whose draw would be a 34th logit row: it waits a pass instead.
  RecordingRunner wide{kVocab, /*max_rows=*/128, /*max_context=*/1024, /*page_size=*/16, /*kv_pages=*/256,
                       /*state_slots=*/keeps_state() ? 8 : 0};
  wide.limit_logit_rows(33);
  LaneHost host(wide, cached_settings());
  const std::vector<int32_t> system = tokens_of(128, 9);
  std::vector<int32_t> sharer = system, resumer = system;
  for (int32_t token : tokens_of(10, 50)) sharer.push_back(token);
  for (int32_t token : tokens_of(11, 70)) resumer.push_back(token);
  GenerateRequest scored = request_of(tokens_of(320, 5), 4);
  scored.prompt_logprobs = 0;
  const std::vector<GenerateRequest> requests = {request_of(sharer, 6), scored, request_of(resumer, 6)};
  std::vector<Outcome> outcomes(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) submit(host, requests[i], outcomes[i]);
  run_until_idle(host);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(outcomes[i].ids, alone_ids(requests[i])) << "stream " << i;
    ASSERT_TRUE(outcomes[i].end.has_value());
    EXPECT_EQ(outcomes[i].end->reason, FinishReason::length) << "stream " << i;
  }
  EXPECT_EQ(outcomes[2].end->cached_tokens, 128);
  for (const auto& call : wide.calls) EXPECT_LE(call.logit_rows.size(), 33u);
}

TEST_P(LaneCacheTest, ARequestCanSkipTheCache) {
  LaneHost host(runner, cached_settings());
  GenerateRequest request = request_of(tokens_of(100, 1), 5);
  run_one(host, runner, request);
  request.cache_prompt = false;
  Served skipped = run_one(host, runner, request);
  EXPECT_EQ(skipped.first_filled, 0);
  EXPECT_EQ(skipped.outcome.end->cached_tokens, 0);
  EXPECT_EQ(skipped.outcome.ids, alone_ids(request));
  EXPECT_EQ(host.stats().cache_lookups, 1u);
}

// 40 pages: room for two streams of 300 positions, and little else. Cached pages must give way
// to every admission, and a stream's ids never change. Returns the lane host's stats.
LaneStats serve_under_pressure(RecordingRunner& small, size_t host_bytes, int32_t snapshot_slots = 0) {
  LaneSettings settings = cached_settings(2);
  settings.host_bytes = host_bytes;
  settings.snapshot_slots = snapshot_slots;
  LaneHost host(small, settings);
  std::mt19937 random(7);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(tokens_of(100 + 30 * i, i * 5 + 1));
  std::vector<Outcome> outcomes(60);
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 60; ++i) {
    std::vector<int32_t> prompt = prompts[random() % prompts.size()];
    prompt.resize(prompt.size() - random() % 50);
    requests.push_back(request_of(prompt, 1 + int64_t(random() % 60)));
  }
  for (int i = 0; i < 60; ++i) {
    submit(host, requests[size_t(i)], outcomes[size_t(i)]);
    for (int s = 0; s < int(random() % 20); ++s) host.step();
  }
  run_until_idle(host);
  for (int i = 0; i < 60; ++i) EXPECT_EQ(outcomes[size_t(i)].ids, alone_ids(requests[size_t(i)])) << "stream " << i;
  const LaneStats stats = host.stats();
  EXPECT_GT(stats.cache_hits, 0u);
  EXPECT_GT(stats.cache.evicted_pages + stats.cache.spilled_pages, 0u);
  EXPECT_EQ(stats.unreserved_pages, 40);
  EXPECT_LE(stats.cache.host_bytes, int64_t(host_bytes));
  return stats;
}

TEST_P(LaneCacheTest, EvictionUnderPressureKeepsEveryStreamExact) {
  RecordingRunner small{kVocab, 64, 1024, 16, 40, keeps_state() ? 4 : 0};
  // Host room for three snapshots and no page.
  const LaneStats stats = serve_under_pressure(small, 3 * std::max<size_t>(small.state_bytes(), 1));
  EXPECT_EQ(stats.cache.spilled_pages, 0u);
}

TEST_P(LaneCacheTest, PagesEvictedToHostMemoryComeBackExact) {
  RecordingRunner small{kVocab, 64, 1024, 16, 40, keeps_state() ? 4 : 0};
  const LaneStats stats = serve_under_pressure(small, 1 << 20);
  EXPECT_GT(stats.cache.spilled_pages, 0u);
  EXPECT_GT(stats.cache.restored_pages, 0u);
  EXPECT_EQ(small.page_loads.size(), stats.cache.restored_pages);
}

TEST_P(LaneCacheTest, SnapshotsInTheCachesOwnSlotsRestoreExact) {
  // Six slots: two for streams, four for the cache's snapshots (then host room for two).
  RecordingRunner small{kVocab, 64, 1024, 16, 40, keeps_state() ? 6 : 0};
  const LaneStats stats = serve_under_pressure(small, 1 << 20, 4);
  if (!keeps_state()) return;
  EXPECT_GT(stats.cache.device_snapshots, 0);
  EXPECT_LE(stats.cache.device_snapshots, 4);
  // Taken slot to slot (into slots 2 to 5) and restored slot to slot (into 0 or 1).
  auto into_streams = [](const RecordingRunner::StateCopy& copy) { return copy.slot < 2; };
  EXPECT_GT(std::count_if(small.copies.begin(), small.copies.end(), into_streams), 0);
  EXPECT_GT(std::count_if(small.copies.begin(), small.copies.end(), std::not_fn(into_streams)), 0);
}

TEST_P(LaneCacheTest, ATurnEvictedToTheHostResumesAsIfItHadStayed) {
  // 24 pages: a second conversation pushes the first one's pages out of device memory.
  RecordingRunner small{kVocab, 64, 1024, 16, 24, keeps_state() ? 4 : 0};
  LaneHost host(small, cached_settings(1));
  const GenerateRequest first = request_of(tokens_of(300, 2), 4);
  run_one(host, small, first);
  run_one(host, small, request_of(tokens_of(300, 50), 4));
  EXPECT_GT(host.stats().cache.host_pages, 0);
  Served again = run_one(host, small, first);
  EXPECT_EQ(again.outcome.ids, alone_ids(first));
  // State: the snapshot at the last cut, 288. Attention: every whole page below 299.
  EXPECT_EQ(again.outcome.end->cached_tokens, 288);
  EXPECT_EQ(again.first_filled, 288);
  EXPECT_FALSE(small.page_loads.empty());
}

INSTANTIATE_TEST_SUITE_P(Models, LaneCacheTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "WithState" : "AttentionOnly"; });

}  // namespace
}  // namespace lockstep
