// A grammar too costly to follow, in the lane host (with the recording fake): the stream that
// reaches such a state fails, saying why, and the others go on.
#include <gtest/gtest.h>

#include "grammar/gbnf.h"
#include "lanes/lane_host.h"
#include "lanes/lane_test_support.h"
#include "lanes/recording_runner.h"

namespace lockstep {
namespace {

constexpr int64_t kVocab = 97;

// Two letters, then one of 300 alternatives: every step into the second letter settles hundreds
// of stacks, so the mask after the first letter costs far more than the first.
std::shared_ptr<Grammar> costly_after_one_letter() {
  std::string gbnf = "root ::= [a-z] [a-z] (";
  for (int i = 0; i < 300; ++i) gbnf += (i ? " | \"" : "\"") + std::string("b") + std::to_string(i) + "\"";
  gbnf += ")";
  auto grammar = std::make_shared<Grammar>();
  Expected<int32_t> root = add_gbnf(*grammar, gbnf);
  EXPECT_TRUE(root.ok()) << (root.ok() ? "" : root.error().message);
  grammar->set_root(*root);
  return grammar;
}

TEST(LaneGrammar, AStreamWhoseNextMaskIsTooCostlyFailsAndTheOthersGoOn) {
  std::vector<std::string> spelled;
  for (int64_t id = 0; id < kVocab; ++id) spelled.push_back(std::string(1, char('a' + id % 26)));
  auto vocabulary = std::make_shared<const Vocabulary>(spelled, std::vector<int32_t>{});
  // Enough for the start's mask (one stack), not for the one after the letter.
  auto masks = std::make_shared<TokenMasks>(costly_after_one_letter(), vocabulary, 2000);
  ASSERT_TRUE(masks->affordable(masks->start()));
  RecordingRunner runner{kVocab, 64, 512, 16, 128, 8};
  LaneHost host(runner, {16, 4, 16});
  GenerateRequest constrained;
  constrained.prompt = {1, 2, 3};
  constrained.max_tokens = 5;
  constrained.ignore_eos = true;
  constrained.grammar = masks;
  GenerateRequest free_stream = constrained;
  free_stream.grammar = nullptr;
  Outcome failed, other;
  submit(host, constrained, failed);
  submit(host, free_stream, other);
  run_until_idle(host);
  ASSERT_TRUE(failed.end.has_value());
  EXPECT_EQ(failed.end->kind, StreamEnd::Kind::failed);
  EXPECT_EQ(failed.end->error, kGrammarTooCostly);
  EXPECT_EQ(failed.ids.size(), 1u);
  EXPECT_EQ(other.ids, RecordingRunner::alone_ids(free_stream, kVocab));
  EXPECT_EQ(host.stats().unreserved_pages, 128);
  // With the real budget the same grammar is followed.
  TokenMasks roomy(costly_after_one_letter(), vocabulary);
  EXPECT_TRUE(roomy.affordable(roomy.after_token(roomy.start(), 0)));
}

}  // namespace
}  // namespace lockstep
