// Drafts with a recording fake whose head is right except where wrong_at() says: windows,
// acceptance, rollback of state and pages, and that the ids with drafts on are the ids alone,
// whatever the drafts, the width, the cache or the ends.
#include <gtest/gtest.h>

#include "lanes/lane_host.h"
#include "lanes/lane_test_support.h"
#include "lanes/recording_runner.h"

namespace lockstep {
namespace {

constexpr int64_t kVocab = 89;

GenerateRequest request_of(int64_t prompt_length, int64_t max_tokens, int32_t first = 1) {
  return prompt_request(kVocab, prompt_length, max_tokens, first, 11);
}

// A fake with a head: 8 streams' slots, and with state enough slots for windows of 4 drafts.
struct Fake {
  explicit Fake(bool state, int32_t end_id = -1, int64_t max_context = 512)
      : runner(kVocab, 64, max_context, 16, 256, state ? 48 : 0, end_id) {
    runner.give_head();
  }
  RecordingRunner runner;
};

LaneSettings drafting(int32_t tokens, int32_t width = 8) {
  LaneSettings settings{16, 8, 64};
  settings.draft_tokens = tokens;
  settings.draft_width = width;
  return settings;
}

// Streams of assorted prompts and lengths, all at once; returns each one's ids.
std::vector<Outcome> run_streams(LaneHost& host, const std::vector<GenerateRequest>& requests) {
  std::vector<Outcome> outcomes(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) submit(host, requests[i], outcomes[i]);
  run_until_idle(host);
  return outcomes;
}

std::vector<GenerateRequest> assorted(int count) {
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < count; ++i) requests.push_back(request_of(1 + i * 9 % 40, 1 + i * 7 % 23, i + 3));
  return requests;
}

class DraftsTest : public ::testing::TestWithParam<bool> {};  // with state slots or not

TEST_P(DraftsTest, IdsAreTheAloneIdsForEveryDraftCount) {
  for (int32_t tokens : {1, 2, 3, 5}) {
    Fake fake(GetParam());
    LaneHost host(fake.runner, drafting(tokens));
    ASSERT_EQ(host.settings().draft_tokens, tokens);
    const std::vector<GenerateRequest> requests = assorted(20);
    const std::vector<Outcome> outcomes = run_streams(host, requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(outcomes[i].ids, RecordingRunner::alone_ids(requests[i], kVocab)) << tokens << " drafts, stream " << i;
      ASSERT_TRUE(outcomes[i].end.has_value());
      EXPECT_EQ(outcomes[i].end->reason, FinishReason::length);
    }
    const LaneStats stats = host.stats();
    EXPECT_GT(stats.accepted, 0u) << tokens << " drafts";
    EXPECT_LT(stats.accepted, stats.drafted) << "the fake's head is wrong at one position in three";
    EXPECT_EQ(stats.drafted_at.size(), size_t(tokens));
    EXPECT_EQ(stats.active, 0);
    EXPECT_EQ(stats.unreserved_pages, 256);
  }
}

TEST_P(DraftsTest, EveryRowDrawsAtItsOwnPosition) {
  Fake fake(GetParam());
  LaneHost host(fake.runner, drafting(3));
  run_streams(host, assorted(6));
  bool windows = false;
  for (const RecordingRunner::Call& call : fake.runner.calls) {
    for (size_t i = 0; i < call.logit_rows.size(); ++i)
      EXPECT_EQ(call.draws[i], call.positions[size_t(call.logit_rows[i])] + 1) << "the draw keyed to the token's position";
    windows |= call.tokens.size() > call.sequences && call.sequences > 0 && call.logit_rows.size() == call.tokens.size();
    if (call.logit_rows.size() == call.tokens.size() && call.tokens.size() > call.sequences) {
      EXPECT_TRUE(call.recurrent) << "a window's rows run as one-row decoding runs them";
    }
  }
  EXPECT_TRUE(windows) << "some round verified drafts";
}

TEST_P(DraftsTest, RightDraftsAreAllAcceptedAndWrongOnesNone) {
  for (bool right : {true, false}) {
    Fake fake(GetParam());
    fake.runner.wrong_at = [right](int64_t) { return !right; };
    LaneHost host(fake.runner, drafting(3));
    const GenerateRequest request = request_of(10, 41);
    Outcome outcome;
    submit(host, request, outcome);
    run_until_idle(host);
    EXPECT_EQ(outcome.ids, RecordingRunner::alone_ids(request, kVocab));
    const LaneStats stats = host.stats();
    if (right) {
      // A round takes 4 tokens (3 drafts and the pick after them): 40 after the fill's first.
      EXPECT_EQ(stats.rounds, 10u);
      EXPECT_EQ(stats.accepted, stats.drafted);
      EXPECT_EQ(outcome.end->accepted_drafts, 30);
      EXPECT_EQ(stats.accepted_at, (std::vector<uint64_t>{10, 10, 10}));
    } else {
      EXPECT_EQ(stats.rounds, 40u);
      EXPECT_EQ(stats.accepted, 0u);
      EXPECT_EQ(outcome.end->accepted_drafts, 0);
      // Each rejected window rolls the state back (else the ids would differ) by trading
      // slots: no copies.
      EXPECT_TRUE(fake.runner.copies.empty());
    }
  }
}

TEST_P(DraftsTest, EndsInsideAWindowAreTheEndsAlone) {
  // An end id, max_tokens and the context can each fall on a draft's row.
  Fake fake(GetParam(), /*end_id=*/7, /*max_context=*/96);
  LaneHost host(fake.runner, drafting(4));
  std::vector<GenerateRequest> requests = assorted(16);
  for (size_t i = 0; i < requests.size(); i += 2) requests[i].ignore_eos = false;
  requests.push_back(request_of(80, 50, 5));  // reaches the context
  const std::vector<Outcome> outcomes = run_streams(host, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    std::vector<int32_t> alone = RecordingRunner::alone_ids(requests[i], kVocab);
    FinishReason reason = FinishReason::length;
    if (auto end = std::find(alone.begin(), alone.end(), 7); !requests[i].ignore_eos && end != alone.end()) {
      alone.erase(end + 1, alone.end());
      reason = FinishReason::stop;
    }
    if (int64_t(requests[i].prompt.size() + alone.size()) > 96)
      alone.resize(size_t(96 - int64_t(requests[i].prompt.size()))), reason = FinishReason::context;
    EXPECT_EQ(outcomes[i].ids, alone) << "stream " << i;
    ASSERT_TRUE(outcomes[i].end.has_value());
    EXPECT_EQ(outcomes[i].end->reason, reason) << "stream " << i;
  }
}

TEST_P(DraftsTest, RoundsWiderThanTheWidthDoNotDraft) {
  Fake fake(GetParam());
  LaneHost host(fake.runner, drafting(2, /*width=*/3));
  const std::vector<GenerateRequest> requests = assorted(8);
  const std::vector<Outcome> outcomes = run_streams(host, requests);
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(outcomes[i].ids, RecordingRunner::alone_ids(requests[i], kVocab)) << "stream " << i;
  for (const RecordingRunner::Call& call : fake.runner.calls)
    if (call.logit_rows.size() == call.tokens.size() && call.sequences > 3) {
      EXPECT_EQ(call.tokens.size(), call.sequences) << "a round of more than 3 streams has a row a stream";
    }
  EXPECT_GT(host.stats().draft_rounds, 0u);
  EXPECT_LT(host.stats().draft_rounds, host.stats().rounds);
}

TEST_P(DraftsTest, ARequestMayTurnItsDraftsOff) {
  Fake fake(GetParam());
  LaneHost host(fake.runner, drafting(3));
  GenerateRequest plain = request_of(5, 30, 2), drafted = request_of(6, 30, 9);
  plain.draft = false;
  Outcome plain_out, drafted_out;
  submit(host, plain, plain_out);
  submit(host, drafted, drafted_out);
  run_until_idle(host);
  EXPECT_EQ(plain_out.ids, RecordingRunner::alone_ids(plain, kVocab));
  EXPECT_EQ(drafted_out.ids, RecordingRunner::alone_ids(drafted, kVocab));
  EXPECT_EQ(plain_out.end->accepted_drafts, 0);
  EXPECT_GT(drafted_out.end->accepted_drafts, 0);
  int prompts = 0;  // head passes over a prompt's first chunk
  for (const RecordingRunner::Call& call : fake.runner.draft_calls) prompts += call.positions.front() == 0;
  EXPECT_EQ(prompts, 1) << "the head takes in the drafting stream's prompt, not the plain one's";
  // Alone, a stream that drafts nothing makes no round a draft round.
  Fake quiet(GetParam());
  LaneHost solo(quiet.runner, drafting(3));
  Outcome solo_out;
  submit(solo, plain, solo_out);
  run_until_idle(solo);
  EXPECT_EQ(solo_out.ids, plain_out.ids);
  EXPECT_GT(solo.stats().rounds, 0u);
  EXPECT_EQ(solo.stats().draft_rounds, 0u) << "rounds that verified no drafts";
}

TEST_P(DraftsTest, ThePromptCacheAndDraftsTogetherKeepTheIds) {
  Fake fake(GetParam());
  LaneSettings settings = drafting(3);
  settings.prompt_cache = true;
  settings.host_bytes = 1 << 20;
  settings.snapshot_slots = 4;
  LaneHost host(fake.runner, settings);
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 12; ++i) {
    GenerateRequest request = request_of(40, 9 + i % 4, 3);  // one prompt, then turns that extend it
    for (int j = 0; j < i % 3; ++j) request.prompt.push_back(int32_t((i + j) % kVocab));
    requests.push_back(request);
  }
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<Outcome> outcomes = run_streams(host, requests);
    for (size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ(outcomes[i].ids, RecordingRunner::alone_ids(requests[i], kVocab)) << "pass " << pass << ", stream " << i;
  }
  EXPECT_GT(host.stats().cache_hits, 0u);
  EXPECT_GT(host.stats().accepted, 0u);
}

TEST_P(DraftsTest, ACancelInsideAWindowStopsTheStreamThere) {
  Fake fake(GetParam());
  fake.runner.wrong_at = [](int64_t) { return false; };
  LaneHost host(fake.runner, drafting(4));
  Outcome outcome, other;
  StreamHandle handle;
  auto submitted = host.submit(request_of(6, 40), {[&](int32_t id) {
                                                     outcome.ids.push_back(id);
                                                     if (outcome.ids.size() == 3) handle.cancel();
                                                   },
                                                   [&](const StreamEnd& end) { outcome.end = end; }});
  ASSERT_TRUE(submitted.handle);
  handle = *submitted.handle;
  submit(host, request_of(9, 25, 4), other);
  run_until_idle(host);
  ASSERT_TRUE(outcome.end.has_value());
  EXPECT_EQ(outcome.end->kind, StreamEnd::Kind::cancelled);
  EXPECT_EQ(outcome.ids.size(), 3u) << "no token after the cancel, though the window had more";
  EXPECT_EQ(other.ids, RecordingRunner::alone_ids(request_of(9, 25, 4), kVocab));
}

INSTANTIATE_TEST_SUITE_P(Models, DraftsTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "with_state" : "attention_only"; });

TEST(DraftSettingsTest, NoHeadMeansNoDrafts) {
  RecordingRunner runner(kVocab, 64, 512, 16, 64, 4);
  LaneHost host(runner, drafting(3));
  EXPECT_EQ(host.settings().draft_tokens, 0);
}

TEST(DraftSettingsTest, FewStateSlotsNarrowTheDraftingWidth) {
  RecordingRunner runner(kVocab, 64, 512, 16, 64, /*state_slots=*/11);
  runner.give_head();
  LaneHost host(runner, drafting(3, 8));
  EXPECT_EQ(host.settings().draft_tokens, 3);
  EXPECT_EQ(host.settings().draft_width, 3) << "(11 - 1) / 3 windows of 3 row slots";
  EXPECT_EQ(host.settings().max_streams, 2) << "the slots the windows leave";
  RecordingRunner tiny(kVocab, 64, 512, 16, 64, /*state_slots=*/3);
  tiny.give_head();
  LaneHost off(tiny, drafting(3, 8));
  EXPECT_EQ(off.settings().draft_tokens, 0) << "no room for a window: no drafts, every slot for streams";
  EXPECT_EQ(off.settings().max_streams, 3);
}

}  // namespace
}  // namespace lockstep
