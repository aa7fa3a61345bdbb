// The lane host's policy, with a recording fake runner: chunks, the alternation of fills and
// rounds, cancels, admission, and that memory always returns to the pools.
#include "lanes/lane_host.h"

#include <gtest/gtest.h>

#include "lanes/lane_test_support.h"
#include "lanes/recording_runner.h"

#include <random>
#include <thread>

namespace lockstep {
namespace {

constexpr int64_t kVocab = 97;

GenerateRequest request_of(int64_t prompt_length, int64_t max_tokens, int32_t first = 1) {
  return prompt_request(kVocab, prompt_length, max_tokens, first);
}

std::vector<int32_t> expected_ids(const GenerateRequest& request) { return RecordingRunner::alone_ids(request, kVocab); }

class LaneHostTest : public ::testing::Test {
 protected:
  RecordingRunner runner{kVocab, /*max_rows=*/64, /*max_context=*/512, /*page_size=*/16, /*kv_pages=*/128,
                       /*state_slots=*/8};
};

TEST_F(LaneHostTest, OneCallFillsExactlyOneChunkAtThePlannedCuts) {
  LaneHost host(runner, {32, 4, 16});
  Outcome outcome;
  submit(host, request_of(100, 1), outcome);
  std::vector<std::pair<int32_t, int32_t>> cuts;
  while (host.step()) {
    const auto& call = runner.calls.back();
    cuts.push_back({call.positions.front(), call.positions.back() + 1});
  }
  std::vector<std::pair<int32_t, int32_t>> expected;
  for (const FillChunk& chunk : fill_plan(0, 100, 32)) expected.push_back({int32_t(chunk.begin), int32_t(chunk.end)});
  EXPECT_EQ(cuts, expected);
  ASSERT_TRUE(outcome.end.has_value());
  EXPECT_EQ(outcome.ids, expected_ids(request_of(100, 1)));
}

TEST_F(LaneHostTest, DecodingRowsRideInEveryChunkOfALongPrompt) {
  LaneHost host(runner, {16, 4, 16});  // max_rows 64: a chunk of 16 and the decoding rows fit
  Outcome decoding, filling;
  submit(host, request_of(3, 50), decoding);
  host.step();  // fills the short prompt; it now decodes
  submit(host, request_of(100, 2, 5), filling);
  const size_t first = runner.calls.size();
  for (int i = 0; i < 7; ++i) host.step();
  // Each call is one chunk of the long prompt (one sequence of 16 rows, the last of 4) and the
  // decoding stream's row (a sequence of one), in one pass.
  for (size_t i = first; i < first + 7; ++i) {
    const auto& call = runner.calls[i];
    EXPECT_EQ(call.tokens.size(), i + 1 < first + 7 ? 17u : 5u) << "call " << i;
    EXPECT_EQ(call.sequences, 2u) << "call " << i;
  }
  EXPECT_EQ(decoding.ids.size(), 1u + 7u) << "a token every pass";
  run_until_idle(host);
  EXPECT_EQ(decoding.ids, expected_ids(request_of(3, 50)));
  EXPECT_EQ(filling.ids, expected_ids(request_of(100, 2, 5)));
}

TEST_F(LaneHostTest, RoundsRunBetweenChunksWhereNoRowFitsBesideThem) {
  LaneHost host(runner, {64, 4, 16});  // a chunk of 64 fills the model's 64 rows
  Outcome decoding, filling;
  submit(host, request_of(3, 50), decoding);
  host.step();
  submit(host, request_of(300, 2, 5), filling);
  size_t first = runner.calls.size();
  for (int i = 0; i < 8; ++i) host.step();
  if (runner.calls[first].tokens.size() == 1) ++first;  // a round may come first
  // From here on calls alternate: a chunk of the long prompt, then a round.
  for (size_t i = first; i + 1 < runner.calls.size(); i += 2) {
    EXPECT_EQ(runner.calls[i].tokens.size(), 64u) << "call " << i << " is a fill step";
    EXPECT_EQ(runner.calls[i + 1].tokens.size(), 1u) << "call " << i + 1 << " is a round";
  }
  run_until_idle(host);
  EXPECT_EQ(decoding.ids, expected_ids(request_of(3, 50)));
  EXPECT_EQ(filling.ids, expected_ids(request_of(300, 2, 5)));
}

TEST_F(LaneHostTest, ShortPromptsArrivingTogetherFillInOnePass) {
  LaneHost host(runner, {32, 8, 16});
  std::vector<Outcome> outcomes(6);
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(request_of(5 + i, 4, 10 + 3 * i));  // 5 to 10 tokens
  for (int i = 0; i < 6; ++i) submit(host, requests[size_t(i)], outcomes[size_t(i)]);
  host.step();
  ASSERT_EQ(runner.calls.size(), 1u);
  EXPECT_EQ(runner.calls[0].sequences, 6u) << "every prompt's chunk in the first pass";
  EXPECT_EQ(runner.calls[0].tokens.size(), size_t(5 + 6 + 7 + 8 + 9 + 10));
  for (const Outcome& outcome : outcomes) EXPECT_EQ(outcome.ids.size(), 1u) << "each has its first token";
  // Prompts longer than a pass's rows: the oldest fills, then as many as fit beside it.
  std::vector<Outcome> longer(3);
  for (int i = 0; i < 3; ++i) submit(host, request_of(40, 2, 50 + i), longer[size_t(i)]);
  run_until_idle(host);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(outcomes[size_t(i)].ids, expected_ids(requests[size_t(i)])) << "stream " << i;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(longer[size_t(i)].ids, expected_ids(request_of(40, 2, 50 + i)));
  LaneStats stats = host.stats();
  EXPECT_EQ(stats.finished, 9u);
}

TEST_F(LaneHostTest, ConcurrentStreamsGetTheirAloneIds) {
  LaneHost host(runner, {8, 8, 64});
  std::vector<Outcome> outcomes(20);
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 20; ++i) requests.push_back(request_of(1 + i * 7, 3 + i % 5, i + 2));
  for (int i = 0; i < 20; ++i) submit(host, requests[size_t(i)], outcomes[size_t(i)]);
  run_until_idle(host);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(outcomes[size_t(i)].ids, expected_ids(requests[size_t(i)])) << "stream " << i;
    ASSERT_TRUE(outcomes[size_t(i)].end.has_value());
    EXPECT_EQ(outcomes[size_t(i)].end->reason, FinishReason::length);
  }
  LaneStats stats = host.stats();
  EXPECT_EQ(stats.finished, 20u);
  EXPECT_EQ(stats.active, 0);
  EXPECT_EQ(stats.queued, 0);
}

TEST_F(LaneHostTest, CancelBetweenChunksStopsTheFillAndFreesItsMemory) {
  LaneHost host(runner, {16, 4, 16});
  Outcome outcome;
  StreamHandle handle = submit(host, request_of(100, 4), outcome);
  host.step();
  host.step();
  ASSERT_EQ(runner.calls.size(), 2u);
  EXPECT_EQ(runner.calls.back().positions.back(), 31);  // two chunks landed
  handle.cancel();
  host.step();
  ASSERT_TRUE(outcome.end.has_value());
  EXPECT_EQ(outcome.end->kind, StreamEnd::Kind::cancelled);
  EXPECT_EQ(runner.calls.size(), 2u);  // nothing ran after the cancel
  EXPECT_TRUE(outcome.ids.empty());
  // Resent, it gives what a run that was never cancelled gives.
  Outcome again;
  submit(host, request_of(100, 4), again);
  run_until_idle(host);
  EXPECT_EQ(again.ids, expected_ids(request_of(100, 4)));
}

TEST_F(LaneHostTest, NoStreamStarvesUnderASteadyFlowOfNewPrompts) {
  LaneHost host(runner, {16, 8, 64});
  Outcome steady;
  submit(host, request_of(4, 40), steady);
  host.step();
  std::vector<Outcome> newcomers(30);
  size_t last_count = steady.ids.size();
  int calls_since_token = 0, worst = 0;
  for (int i = 0; i < 60 && !steady.end; ++i) {
    if (i % 2 == 0 && i / 2 < 30) submit(host, request_of(40, 2, i), newcomers[size_t(i / 2)]);
    host.step();
    calls_since_token = steady.ids.size() > last_count ? 0 : calls_since_token + 1;
    last_count = steady.ids.size();
    worst = std::max(worst, calls_since_token);
  }
  EXPECT_LE(worst, 1) << "the decoding stream waited more than one fill step between tokens";
  run_until_idle(host);
  EXPECT_EQ(steady.ids, expected_ids(request_of(4, 40)));
}

TEST_F(LaneHostTest, MemoryReturnsToThePoolsAfterEveryKindOfEnding) {
  RecordingRunner small{kVocab, 64, 256, 16, /*kv_pages=*/16, /*state_slots=*/2, /*end_id=*/-1};
  LaneHost host(small, {16, 2, 8});
  Outcome by_length, by_context, queued_then_cancelled, active_then_cancelled;
  submit(host, request_of(10, 3), by_length);
  GenerateRequest long_one = request_of(200, 1000);  // runs into the context
  submit(host, long_one, by_context);
  StreamHandle waiting = submit(host, request_of(5, 5), queued_then_cancelled);  // no slot free yet
  host.step();
  waiting.cancel();
  run_until_idle(host);
  StreamHandle running = submit(host, request_of(50, 5), active_then_cancelled);
  host.step();
  running.cancel();
  run_until_idle(host);
  EXPECT_EQ(by_length.end->reason, FinishReason::length);
  EXPECT_EQ(by_context.end->reason, FinishReason::context);
  EXPECT_EQ(by_context.ids.size(), 56u);  // positions 200..255
  EXPECT_EQ(queued_then_cancelled.end->kind, StreamEnd::Kind::cancelled);
  EXPECT_EQ(active_then_cancelled.end->kind, StreamEnd::Kind::cancelled);
  LaneStats stats = host.stats();
  EXPECT_EQ(stats.active, 0);
  EXPECT_EQ(stats.queued, 0);
  EXPECT_EQ(stats.finished, 2u);
  EXPECT_EQ(stats.cancelled, 2u);
  EXPECT_EQ(stats.unreserved_pages, 16);
  EXPECT_EQ(stats.free_slots, 2);
  // Every page and slot is free again: the largest possible stream fits once more.
  Outcome full;
  submit(host, request_of(100, 156), full);
  run_until_idle(host);
  EXPECT_EQ(full.ids.size(), 156u);
}

TEST_F(LaneHostTest, EndIdsStopAStreamUnlessIgnored) {
  int32_t end_id = RecordingRunner::next_id(std::vector<int32_t>{1}, kVocab);  // the first id after prompt {1}
  RecordingRunner with_end{kVocab, 64, 512, 16, 64, 4, end_id};
  LaneHost host(with_end, {16, 4, 16});
  GenerateRequest request = request_of(1, 5);
  request.ignore_eos = false;
  Outcome stopped, ignored;
  submit(host, request, stopped);
  request.ignore_eos = true;
  submit(host, request, ignored);
  run_until_idle(host);
  EXPECT_EQ(stopped.ids, std::vector<int32_t>{end_id});
  EXPECT_EQ(stopped.end->reason, FinishReason::stop);
  EXPECT_EQ(ignored.ids.size(), 5u);
}

TEST_F(LaneHostTest, RefusesInvalidAndOversizedRequestsAndAFullQueue) {
  LaneHost host(runner, {16, 1, 2});
  auto empty = host.submit(GenerateRequest{}, {});
  ASSERT_TRUE(empty.error.has_value());
  EXPECT_EQ(empty.error->kind, SubmitError::Kind::invalid);
  GenerateRequest bad = request_of(3, 1);
  bad.prompt[1] = int32_t(kVocab);
  EXPECT_EQ(host.submit(bad, {}).error->kind, SubmitError::Kind::invalid);
  EXPECT_EQ(host.submit(request_of(600, 1), {}).error->kind, SubmitError::Kind::invalid);  // over the context
  // One stream runs, two may wait: the fourth is one too many.
  Outcome a, b, c;
  submit(host, request_of(3, 3), a);
  submit(host, request_of(3, 3), b);
  submit(host, request_of(3, 3), c);
  auto fourth = host.submit(request_of(3, 3), {});
  ASSERT_TRUE(fourth.error.has_value());
  EXPECT_EQ(fourth.error->kind, SubmitError::Kind::busy);
}

// --max-queue is the streams that must wait: those the free places will admit never count, so an
// idle host takes as many at once as it runs, however short its queue.
TEST_F(LaneHostTest, TheQueueLimitCountsOnlyStreamsThatMustWait) {
  LaneHost wide(runner, {16, 8, 2});
  std::vector<Outcome> outcomes(10);
  for (Outcome& outcome : outcomes) submit(wide, request_of(3, 2), outcome);
  EXPECT_EQ(wide.submit(request_of(3, 2), {}).error->kind, SubmitError::Kind::busy);
  run_until_idle(wide);
  for (const Outcome& outcome : outcomes) EXPECT_EQ(outcome.ids, expected_ids(request_of(3, 2)));
  RecordingRunner other{kVocab, 64, 512, 16, 128, 8};
  LaneHost single(other, {16, 1, 0});
  Outcome only;
  submit(single, request_of(3, 2), only);
  EXPECT_EQ(single.submit(request_of(3, 2), {}).error->kind, SubmitError::Kind::busy);
  run_until_idle(single);
  EXPECT_EQ(only.ids, expected_ids(request_of(3, 2)));
}

TEST_F(LaneHostTest, ThreadedHostDeliversEverythingAndStopCancelsTheRest) {
  LaneHost host(runner, {16, 4, 64});
  host.start();
  std::vector<Outcome> outcomes(8);
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(request_of(5 + i * 11, 6, i));
  std::mutex done_mutex;
  std::condition_variable done;
  int finished = 0;
  for (int i = 0; i < 8; ++i) {
    host.submit(requests[size_t(i)], {[&, i](int32_t id) { outcomes[size_t(i)].ids.push_back(id); },
                                      [&, i](const StreamEnd& end) {
                                        std::lock_guard lock(done_mutex);
                                        outcomes[size_t(i)].end = end;
                                        ++finished;
                                        done.notify_one();
                                      }});
  }
  {
    std::unique_lock lock(done_mutex);
    ASSERT_TRUE(done.wait_for(lock, std::chrono::seconds(20), [&] { return finished == 8; }));
  }
  for (int i = 0; i < 8; ++i) EXPECT_EQ(outcomes[size_t(i)].ids, expected_ids(requests[size_t(i)]));
  host.stop();
}

TEST_F(LaneHostTest, StopCancelsWhatIsLeft) {
  LaneHost host(runner, {16, 4, 64});
  Outcome waiting;
  submit(host, request_of(5, 40), waiting);
  host.stop();
  ASSERT_TRUE(waiting.end.has_value());
  EXPECT_EQ(waiting.end->kind, StreamEnd::Kind::cancelled);
  EXPECT_EQ(host.stats().cancelled, 1u);
}

}  // namespace
}  // namespace lockstep

namespace lockstep {
namespace {

TEST(LaneHostStress, HundredsOfStreamsWithRandomCancelsLeaveThePoolsFull) {
  RecordingRunner runner{kVocab, 64, 256, 16, /*kv_pages=*/96, /*state_slots=*/6};
  LaneHost host(runner, {16, 6, 512});
  host.start();
  std::mt19937 rng(99);
  constexpr int kStreams = 400;
  std::vector<Outcome> outcomes(kStreams);
  std::vector<GenerateRequest> requests;
  std::mutex mutex;
  std::condition_variable ended;
  int ends = 0;
  std::vector<StreamHandle> handles;
  for (int i = 0; i < kStreams; ++i) {
    requests.push_back(request_of(1 + rng() % 120, 1 + rng() % 30, int32_t(rng() % kVocab)));
    auto submitted = host.submit(requests.back(), {[&, i](int32_t id) { outcomes[size_t(i)].ids.push_back(id); },
                                                   [&, i](const StreamEnd& end) {
                                                     std::lock_guard lock(mutex);
                                                     outcomes[size_t(i)].end = end;
                                                     ++ends;
                                                     ended.notify_one();
                                                   }});
    ASSERT_TRUE(submitted.handle.has_value());
    handles.push_back(*submitted.handle);
    if (rng() % 4 == 0) handles[rng() % handles.size()].cancel();
    if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
  }
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(ended.wait_for(lock, std::chrono::seconds(60), [&] { return ends == kStreams; }));
  }
  host.stop();
  int finished = 0;
  for (int i = 0; i < kStreams; ++i) {
    const Outcome& outcome = outcomes[size_t(i)];
    ASSERT_TRUE(outcome.end.has_value());
    std::vector<int32_t> expected = expected_ids(requests[size_t(i)]);
    if (outcome.end->kind == StreamEnd::Kind::finished) {
      ++finished;
      EXPECT_EQ(outcome.ids, expected) << "stream " << i;
    } else {
      // A cancelled stream's ids are a prefix of what it would have said.
      ASSERT_LE(outcome.ids.size(), expected.size());
      EXPECT_TRUE(std::equal(outcome.ids.begin(), outcome.ids.end(), expected.begin())) << "stream " << i;
    }
  }
  EXPECT_GT(finished, kStreams / 2);
  LaneStats stats = host.stats();
  EXPECT_EQ(stats.active, 0);
  EXPECT_EQ(stats.queued, 0);
  EXPECT_EQ(stats.finished + stats.cancelled, uint64_t(kStreams));
  EXPECT_EQ(stats.unreserved_pages, 96);  // the pools are full again
  EXPECT_EQ(stats.free_slots, 6);
}

}  // namespace
}  // namespace lockstep
