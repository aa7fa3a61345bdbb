// The one request check and the one stop rule that every entry point shares.
#include "lanes/request.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lockstep {
namespace {

ModelInfo info_of(int64_t vocab, int64_t context, std::vector<int32_t> eos = {}) {
  ModelInfo info;
  info.vocab_size = vocab;
  info.max_context = context;
  info.eos_ids = std::move(eos);
  return info;
}

GenerateRequest request_of(int64_t length, int64_t max_tokens) {
  GenerateRequest request;
  request.prompt.assign(size_t(length), 1);
  request.max_tokens = max_tokens;
  return request;
}

std::string field_of(const std::optional<RequestProblem>& problem) { return problem ? problem->field : "(none)"; }

TEST(CheckRequest, APromptMustLeaveRoomForOneToken) {
  const ModelInfo info = info_of(50, 16);
  EXPECT_FALSE(check_request(info, request_of(15, 1)).has_value());
  auto full = check_request(info, request_of(16, 1));
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(full->field, "prompt");
  EXPECT_NE(full->message.find("the prompt has 16 tokens; the context holds 16"), std::string::npos) << full->message;
  // The same threshold for a prompt alone (SoloRun's logits take it).
  EXPECT_EQ(field_of(check_prompt(info, std::vector<int32_t>(16, 1))), "prompt");
  EXPECT_FALSE(check_prompt(info, std::vector<int32_t>(15, 1)).has_value());
  // A request that generates nothing (max_tokens 0: its prompt's logprobs) may fill the context.
  EXPECT_FALSE(check_request(info, request_of(16, 0)).has_value());
  EXPECT_EQ(field_of(check_request(info, request_of(17, 0))), "prompt");
}

TEST(CheckRequest, EachProblemNamesItsField) {
  const ModelInfo info = info_of(50, 64);
  EXPECT_EQ(field_of(check_request(info, request_of(0, 4))), "prompt");
  GenerateRequest out_of_vocab = request_of(3, 4);
  out_of_vocab.prompt[1] = 50;
  auto problem = check_request(info, out_of_vocab);
  EXPECT_EQ(field_of(problem), "prompt");
  EXPECT_NE(problem->message.find("50"), std::string::npos);
  out_of_vocab.prompt[1] = -1;
  EXPECT_EQ(field_of(check_request(info, out_of_vocab)), "prompt");
  EXPECT_EQ(field_of(check_request(info, request_of(3, -1))), "max_tokens");
  EXPECT_EQ(field_of(check_request(info, request_of(3, 0))), "(none)");  // fill only (prompt logprobs)
  GenerateRequest logprobs = request_of(3, 4);
  logprobs.top_logprobs = 21;
  EXPECT_EQ(field_of(check_request(info, logprobs)), "logprobs");
  GenerateRequest hot = request_of(3, 4);
  hot.sampling.temperature = NAN;
  EXPECT_EQ(field_of(check_request(info, hot)), "temperature");
  GenerateRequest top_p = request_of(3, 4);
  top_p.sampling.top_p = 0.0f;
  EXPECT_EQ(field_of(check_request(info, top_p)), "top_p");
  // max_tokens past the context is the lanes' to end, not a refusal.
  EXPECT_FALSE(check_request(info, request_of(3, 1000)).has_value());
}

TEST(FinishAfter, EndIdThenMaxTokensThenContext) {
  const ModelInfo info = info_of(50, 16, {7});
  GenerateRequest request = request_of(4, 3);
  EXPECT_FALSE(finish_after(info, request, 5, 1, 4).has_value());
  EXPECT_EQ(finish_after(info, request, 7, 1, 4), FinishReason::stop);
  EXPECT_EQ(finish_after(info, request, 7, 3, 15), FinishReason::stop);  // an end id wins
  EXPECT_EQ(finish_after(info, request, 5, 3, 15), FinishReason::length);
  request.max_tokens = 100;
  EXPECT_EQ(finish_after(info, request, 5, 12, 15), FinishReason::context);
  EXPECT_FALSE(finish_after(info, request, 5, 11, 14).has_value());
  request.ignore_eos = true;
  EXPECT_FALSE(finish_after(info, request, 7, 1, 4).has_value());
}

// A thinking budget forces the end of thinking once spent, and only while thinking: once closed,
// a later <think> is text.
TEST(ThinkingBudgetTest, ForcesTheCloseOnlyWhileThinking) {
  GenerateRequest request;
  request.think_budget = 2;
  request.think_open = 7;
  request.think_close = 8;
  ThinkingBudget budget(request);
  EXPECT_EQ(budget.forced(), -1);  // not thinking yet
  budget.accept(7);
  budget.accept(1);
  EXPECT_EQ(budget.forced(), -1);
  budget.accept(2);
  EXPECT_EQ(budget.forced(), 8);
  budget.accept(8);
  EXPECT_EQ(budget.forced(), -1);
  budget.accept(7);
  for (int i = 0; i < 5; ++i) budget.accept(3);
  EXPECT_EQ(budget.forced(), -1);
}

}  // namespace
}  // namespace lockstep
