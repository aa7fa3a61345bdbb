#include "sampling/logit_edits.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

TEST(LogitEdits, TheRuleInItsOrder) {
  LogitEdit e;
  e.count = 2.0f;
  e.in_context = 1;
  e.presence = 0.5f;
  e.frequency = 0.25f;
  e.repetition = 2.0f;
  e.bias = 1.0f;
  EXPECT_EQ(edited_logit(4.0f, e), 4.0f / 2.0f - 0.5f - 0.5f + 1.0f);
  EXPECT_EQ(edited_logit(-4.0f, e), -4.0f * 2.0f - 0.5f - 0.5f + 1.0f);
  e.count = 0.0f;  // in the prompt only: repetition, not OpenAI's penalties
  EXPECT_EQ(edited_logit(4.0f, e), 4.0f / 2.0f + 1.0f);
}

TEST(LogitEdits, CountsGiveOneEditPerTokenThatNeedsOne) {
  LogitAdjustments adjust;
  adjust.frequency = 1.0f;
  adjust.bias = {{9, -3.0f}};
  TokenCounts counts(adjust, {1, 2, 2});
  counts.add(5);
  counts.add(5);
  counts.add(9);
  std::vector<LogitEdit> edits;
  counts.edits(3, edits);
  ASSERT_EQ(edits.size(), 2u) << "without repetition the prompt's tokens need nothing";
  EXPECT_EQ(edits[0].token, 5);
  EXPECT_EQ(edits[0].count, 2.0f);
  EXPECT_EQ(edits[0].row, 3);
  EXPECT_EQ(edits[1].token, 9);
  EXPECT_EQ(edits[1].bias, -3.0f);
  adjust.repetition = 1.2f;
  TokenCounts with_prompt(adjust, {1, 2, 2});
  edits.clear();
  with_prompt.edits(0, edits);
  ASSERT_EQ(edits.size(), 3u);  // 1, 2 (in context), 9 (bias)
  EXPECT_EQ(edits[0].in_context, 1);
  EXPECT_EQ(edits[2].in_context, 0);
  std::vector<float> logits(12, 1.0f);
  apply_edits(logits.data(), 12, edits);
  EXPECT_EQ(logits[1], 1.0f / 1.2f);
  EXPECT_EQ(logits[9], 1.0f - 3.0f);
  EXPECT_EQ(logits[0], 1.0f);
}

TEST(LogitEdits, ValuesOutOfRangeNameTheirField) {
  std::string field;
  LogitAdjustments adjust;
  EXPECT_EQ(logit_adjustments_problem(adjust, 10, &field), "");
  adjust.presence = 2.5f;
  EXPECT_NE(logit_adjustments_problem(adjust, 10, &field), "");
  EXPECT_EQ(field, "presence_penalty");
  adjust = {};
  adjust.repetition = 0.0f;
  EXPECT_NE(logit_adjustments_problem(adjust, 10, &field), "");
  EXPECT_EQ(field, "repetition_penalty");
  adjust = {};
  adjust.bias = {{10, 1.0f}};
  EXPECT_NE(logit_adjustments_problem(adjust, 10, &field), "");
  EXPECT_EQ(field, "logit_bias");
}

}  // namespace
}  // namespace lockstep
