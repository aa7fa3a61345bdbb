// Prompt logprobs (echo with logprobs) and max_tokens 0 in the lane host, with the recording
// fake: each prompt token after the first is scored by the row before it, in every chunk, before
// the stream's first token, and the stream fills its whole prompt (no prompt cache).
#include <gtest/gtest.h>

#include "lanes/lane_host.h"
#include "lanes/lane_test_support.h"
#include "lanes/recording_runner.h"

namespace lockstep {
namespace {

constexpr int64_t kVocab = 97;

GenerateRequest request_of(int64_t prompt_length, int64_t max_tokens, int32_t first = 1) {
  return prompt_request(kVocab, prompt_length, max_tokens, first);
}

struct Scored {
  Outcome outcome;
  std::vector<TokenLogprobs> prompt;
  size_t tokens_before_scores_done = 0;  // tokens that arrived before the last prompt score
};

StreamHandle submit_scored(LaneHost& host, GenerateRequest request, Scored& scored) {
  StreamEvents events{[&scored](int32_t id) { scored.outcome.ids.push_back(id); },
                      [&scored](const StreamEnd& end) { scored.outcome.end = end; }};
  events.on_prompt_logprobs = [&scored](const TokenLogprobs& lp) {
    scored.prompt.push_back(lp);
    scored.tokens_before_scores_done = scored.outcome.ids.size();
  };
  auto submitted = host.submit(std::move(request), std::move(events));
  EXPECT_TRUE(submitted.handle.has_value()) << (submitted.error ? submitted.error->message : "");
  return submitted.handle.value_or(StreamHandle());
}

// What the fake would pick after each prefix of `prompt`: the token its row "predicts".
std::vector<int32_t> fake_picks(const std::vector<int32_t>& prompt) {
  std::vector<int32_t> picks;
  for (size_t p = 1; p < prompt.size(); ++p) {
    GenerateRequest prefix = request_of(0, 1);
    prefix.prompt.assign(prompt.begin(), prompt.begin() + int64_t(p));
    picks.push_back(RecordingRunner::alone_ids(prefix, kVocab)[0]);
  }
  return picks;
}

TEST(LanePromptScores, EveryPromptTokenAfterTheFirstIsScoredAcrossChunksBeforeTheFirstToken) {
  RecordingRunner runner{kVocab, 64, 512, 16, 128, 8};
  LaneHost host(runner, {16, 4, 16});
  GenerateRequest request = request_of(50, 5);
  request.prompt_logprobs = 1;
  // Make some prompt tokens the fake's own picks, so both verdicts show up.
  for (size_t p = 10; p < 50; p += 7) {
    GenerateRequest prefix = request;
    prefix.prompt.resize(p);
    request.prompt[p] = RecordingRunner::alone_ids(prefix, kVocab)[0];
  }
  Scored scored;
  submit_scored(host, request, scored);
  run_until_idle(host);
  ASSERT_EQ(scored.prompt.size(), 49u);
  EXPECT_EQ(scored.tokens_before_scores_done, 0u);
  const std::vector<int32_t> picks = fake_picks(request.prompt);
  int hits = 0;
  for (size_t i = 0; i < scored.prompt.size(); ++i) {
    EXPECT_EQ(scored.prompt[i].id, request.prompt[i + 1]) << "prompt token " << i + 1;
    ASSERT_EQ(scored.prompt[i].top.size(), 1u);
    EXPECT_EQ(scored.prompt[i].top[0].first, picks[i]) << "scored from the row of token " << i;
    EXPECT_EQ(scored.prompt[i].logprob, picks[i] == request.prompt[i + 1] ? 0.0f : -1.0f);
    hits += picks[i] == request.prompt[i + 1];
  }
  EXPECT_GE(hits, 5);
  // Scores change no token: the reply is the one without them.
  GenerateRequest plain = request;
  plain.prompt_logprobs = -1;
  EXPECT_EQ(scored.outcome.ids, RecordingRunner::alone_ids(plain, kVocab));
}

TEST(LanePromptScores, MaxTokensZeroFillsThePromptAndEndsWithLength) {
  RecordingRunner runner{kVocab, 64, 512, 16, 128, 8};
  LaneHost host(runner, {16, 4, 16});
  GenerateRequest request = request_of(40, 0);
  request.prompt_logprobs = 0;
  Scored scored, beside;
  submit_scored(host, request, scored);
  submit_scored(host, request_of(9, 6, 3), beside);
  run_until_idle(host);
  EXPECT_TRUE(scored.outcome.ids.empty());
  ASSERT_TRUE(scored.outcome.end.has_value());
  EXPECT_EQ(scored.outcome.end->reason, FinishReason::length);
  EXPECT_EQ(scored.prompt.size(), 39u);
  EXPECT_EQ(beside.outcome.ids, RecordingRunner::alone_ids(request_of(9, 6, 3), kVocab));
  EXPECT_EQ(host.stats().unreserved_pages, 128);
}

TEST(LanePromptScores, AScoringStreamNeitherResumesFromNorFillsThePromptCache) {
  RecordingRunner runner{kVocab, 64, 512, 16, 128, 0};
  LaneSettings settings{16, 4, 16};
  settings.prompt_cache = true;
  LaneHost host(runner, settings);
  Outcome first;
  submit(host, request_of(40, 2), first);
  run_until_idle(host);
  GenerateRequest again = request_of(40, 2);
  again.prompt_logprobs = 0;
  Scored scored;
  submit_scored(host, again, scored);
  run_until_idle(host);
  ASSERT_TRUE(scored.outcome.end.has_value());
  EXPECT_EQ(scored.outcome.end->cached_tokens, 0);
  EXPECT_EQ(scored.prompt.size(), 39u);
  EXPECT_EQ(scored.outcome.ids, first.ids);
}

// A model whose passes hold few logit rows (ModelInfo::max_logit_rows, which serve sets to
// --chunk + --parallel): scored chunks take a pass with logit rows to spare, short prompts still
// pack beside them, no pass asks for more, and every score and token is as without the limit.
TEST(LanePromptScores, ScoredChunksWaitForLogitRowsWithTheSameScores) {
  auto run = [](int64_t logit_rows, std::vector<Scored>& scored, size_t& most_logits, size_t& most_sequences) {
    RecordingRunner runner{kVocab, 64, 512, 16, 128, 8};
    if (logit_rows > 0) runner.limit_logit_rows(logit_rows);
    LaneHost host(runner, {16, 6, 16});
    for (int i = 0; i < 6; ++i) {
      GenerateRequest request = request_of(i < 3 ? 40 : 5, 4, 3 + 11 * i);
      request.prompt_logprobs = i < 3 ? 1 : -1;
      submit_scored(host, request, scored[size_t(i)]);
    }
    run_until_idle(host);
    for (const auto& call : runner.calls) {
      most_logits = std::max(most_logits, call.logit_rows.size());
      most_sequences = std::max(most_sequences, call.sequences);
    }
  };
  std::vector<Scored> limited(6), free(6);
  size_t limited_logits = 0, limited_sequences = 0, free_logits = 0, free_sequences = 0;
  run(22, limited, limited_logits, limited_sequences);
  run(0, free, free_logits, free_sequences);
  EXPECT_LE(limited_logits, 22u);
  EXPECT_GT(free_logits, 22u) << "without the limit a pass packs several scored chunks";
  EXPECT_GE(limited_sequences, 2u) << "short prompts still pack beside a scored chunk";
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(limited[i].outcome.ids, free[i].outcome.ids) << "stream " << i;
    ASSERT_EQ(limited[i].prompt.size(), free[i].prompt.size()) << "stream " << i;
    for (size_t p = 0; p < limited[i].prompt.size(); ++p) {
      EXPECT_EQ(limited[i].prompt[p].id, free[i].prompt[p].id);
      EXPECT_EQ(limited[i].prompt[p].top, free[i].prompt[p].top);
    }
  }
  EXPECT_EQ(limited[0].prompt.size(), 39u);
}

}  // namespace
}  // namespace lockstep
