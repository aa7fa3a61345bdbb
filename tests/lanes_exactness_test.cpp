// Exactness through the lane host with the real fixture models of every family: each stream's
// ids, at any concurrency, greedy or seeded, equal its alone run, bit for bit.
#include "fixture_lanes.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "sampling/logprobs.h"

namespace lockstep {
namespace {

using LanesExactness = FixtureLanes;

TEST_P(LanesExactness, EveryConcurrencyLevelMatchesTheAloneRuns) {
  for (bool seeded : {false, true}) {
    std::vector<GenerateRequest> all = requests(24, seeded, seeded ? 7 : 3);
    std::vector<std::vector<int32_t>> expected;
    for (const auto& request : all) expected.push_back(alone(request));
    for (int streams : {1, 2, 4, 8, 24}) {
      ModelRunner runner(*model);
      LaneHost host(runner, {kChunk, streams, 64});
      std::vector<LaneResult> results(static_cast<size_t>(streams));
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
  std::vector<LaneResult> results(all.size());
  for (size_t i = 0; i < all.size(); ++i) submit(host, all[i], results[i]);
  run_until_idle(host);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(results[i].ids, alone(all[i])) << "stream " << i;
}

// Penalties and logit_bias come from each stream's own tokens: streams with different ones, and
// streams without, share rounds and still each get their alone run (which applies them on the
// host), greedy and seeded.
TEST_P(LanesExactness, PenaltiesAndLogitBiasKeepEveryStreamsAloneIds) {
  std::vector<GenerateRequest> all = requests(8, false, 31), seeded = requests(8, true, 37);
  for (int i = 0; i < 8; ++i) {
    GenerateRequest& request = i % 2 ? seeded[size_t(i)] : all[size_t(i)];
    request.max_tokens += 8;
    if (i % 4 == 0) request.adjust.presence = 1.5f, request.adjust.frequency = 0.5f;
    if (i % 4 == 1) request.adjust.repetition = 1.3f;
    if (i % 4 == 2) request.adjust.bias = {{3, 100.0f}, {int32_t(i), -100.0f}, {11, 2.5f}};
    all[size_t(i)] = request;
  }
  ModelRunner runner(*model);
  LaneHost host(runner, {kChunk, 8, 64});
  std::vector<LaneResult> results(all.size());
  for (size_t i = 0; i < all.size(); ++i) submit(host, all[i], results[i]);
  run_until_idle(host);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(results[i].ids, alone(all[i])) << "stream " << i;
    GenerateRequest plain = all[i];
    plain.adjust = {};
    if (i % 4 == 2) {  // a bias of +100 makes every greedy token that one
      EXPECT_NE(alone(plain), results[i].ids) << "stream " << i << ": the bias changed nothing";
    }
  }
}

// A grammar's masks come from each stream's own tokens: constrained streams (two sharing one
// grammar's masks, as a request's choices do) beside free ones each get their alone run, greedy
// and seeded, and their text keeps to the grammar.
TEST_P(LanesExactness, GrammarStreamsKeepTheirAloneIdsAndTheGrammar) {
  const ModelInfo& info = model->info();
  static const char* const kPieces[] = {"{", "}", "\"", "a", "b", ":", ",", " ", "1", "2",
                                        "-", "[", "]", "true", "null", "\"a\"", "x", "\\n", ".", "e"};
  std::vector<std::string> spelled(size_t(info.vocab_size));
  for (int64_t id = 0; id < info.vocab_size; ++id) spelled[size_t(id)] = kPieces[id % 20];
  for (int32_t id : info.eos_ids) spelled[size_t(id)].clear();
  auto vocabulary = std::make_shared<const Vocabulary>(spelled, info.eos_ids);
  auto grammar = std::make_shared<Grammar>();
  Expected<int32_t> root = add_json_schema(*grammar, nlohmann::ordered_json::parse(R"({"type": "object",
      "properties": {"a": {"type": "array", "items": {"type": "integer"}}, "b": {"type": "string"}},
      "required": ["a", "b"]})"));
  ASSERT_TRUE(root.ok());
  grammar->set_root(*root);
  std::vector<GenerateRequest> all = requests(6, false, 41), seeded = requests(6, true, 43);
  std::shared_ptr<TokenMasks> shared[2] = {std::make_shared<TokenMasks>(grammar, vocabulary),
                                           std::make_shared<TokenMasks>(grammar, vocabulary)};
  for (int i = 0; i < 6; ++i) {
    GenerateRequest& request = i % 2 ? seeded[size_t(i)] : all[size_t(i)];
    request.max_tokens = 40;
    if (i < 4) request.grammar = shared[i % 2], request.ignore_eos = false;
    all[size_t(i)] = request;
  }
  ModelRunner runner(*model);
  LaneHost host(runner, {kChunk, 6, 64});
  std::vector<LaneResult> results(all.size());
  for (size_t i = 0; i < all.size(); ++i) submit(host, all[i], results[i]);
  run_until_idle(host);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(results[i].ids, alone(all[i])) << "stream " << i;
    if (i >= 4) continue;
    GrammarState state = grammar_start(*grammar);
    std::string text;
    for (int32_t id : results[i].ids) {
      if (vocabulary->is_end(id)) {
        EXPECT_TRUE(state.can_end) << "ended early: " << text;
        break;
      }
      text += spelled[size_t(id)];
      for (char c : spelled[size_t(id)]) state = grammar_step(*grammar, state, uint8_t(c));
      ASSERT_FALSE(state.finished() && !state.can_end) << "off the grammar: " << text;
    }
    if (text.size() >= 5) {
      EXPECT_EQ(text.substr(0, 5), "{\"a\":");
    }
  }
}

TEST_P(LanesExactness, ALongPromptArrivingMidDecodeChangesNothing) {
  std::vector<GenerateRequest> all = requests(6, true, 11);
  GenerateRequest long_prompt = requests(5, false, 13)[4];  // 300 tokens
  long_prompt.max_tokens = 6;
  ModelRunner runner(*model);
  LaneHost host(runner, {kChunk, 8, 64});
  std::vector<LaneResult> results(6);
  LaneResult late;
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
  LaneResult cancelled, neighbour, resent;
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

// Echo with logprobs: every prompt token's logprob (and alternatives), from fill chunks shared
// with decoding streams, is the log-softmax of the alone run's logits at the row before it, bit
// for bit; the scoring stream's ids and its neighbours' are their alone runs'.
TEST_P(LanesExactness, PromptLogprobsAreTheAloneLogitsAndChangeNoIds) {
  std::vector<GenerateRequest> all = requests(5, true, 23);
  all[0] = requests(5, false, 29)[3];  // 130 tokens: three chunks
  all[0].prompt_logprobs = 3;
  all[1].prompt_logprobs = 0;
  all[1].max_tokens = 0;
  ModelRunner runner(*model);
  LaneHost host(runner, {kChunk, 8, 64});
  std::vector<LaneResult> results(all.size());
  std::vector<std::vector<TokenLogprobs>> scores(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    StreamEvents events{[&results, i](int32_t id) { results[i].ids.push_back(id); },
                        [&results, i](const StreamEnd& end) { results[i].end = end; }};
    events.on_prompt_logprobs = [&scores, i](const TokenLogprobs& lp) { scores[i].push_back(lp); };
    auto submitted = host.submit(all[i], std::move(events));
    ASSERT_TRUE(submitted.handle.has_value()) << submitted.error->message;
  }
  run_until_idle(host);
  const int64_t vocab = model->info().vocab_size;
  const bool on_gpu = GetParam().find('@') != std::string::npos;
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<int32_t>& prompt = all[i].prompt;
    ASSERT_EQ(scores[i].size(), prompt.size() - 1) << "stream " << i;
    SoloRun run(*solo_model, kChunk);
    auto logits = run.prompt_logits(prompt);
    ASSERT_TRUE(logits.ok()) << logits.error().message;
    for (size_t p = 1; p < prompt.size(); ++p) {
      TokenLogprobs expected;
      compute_logprobs(logits->data() + int64_t(p - 1) * vocab, vocab, prompt[p], all[i].prompt_logprobs, expected);
      const TokenLogprobs& got = scores[i][p - 1];
      EXPECT_EQ(got.id, prompt[p]);
      if (!on_gpu) {
        EXPECT_EQ(got.logprob, expected.logprob) << "stream " << i << " prompt token " << p;
        EXPECT_EQ(got.top, expected.top) << "stream " << i << " prompt token " << p;
        continue;
      }
      // The GPU's log-softmax sums in another order (CudaVsCpu.TokenLogprobsMatchTheHost).
      EXPECT_NEAR(got.logprob, expected.logprob, 1e-5 * std::max(1.0f, std::fabs(expected.logprob)));
      ASSERT_EQ(got.top.size(), expected.top.size());
      for (size_t j = 0; j < got.top.size(); ++j) EXPECT_EQ(got.top[j].first, expected.top[j].first);
    }
  }
  EXPECT_TRUE(results[1].ids.empty());
  ASSERT_TRUE(results[1].end.has_value());
  EXPECT_EQ(results[1].end->reason, FinishReason::length);
  for (size_t i = 0; i < all.size(); ++i) {
    if (i == 1) continue;
    EXPECT_EQ(results[i].ids, alone(all[i])) << "stream " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, LanesExactness, ::testing::ValuesIn(families_and_backends()),
                         backend_param_name);

}  // namespace
}  // namespace lockstep
