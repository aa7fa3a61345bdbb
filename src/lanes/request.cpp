#include "lanes/request.h"

#include <algorithm>

namespace lockstep {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::length: return "length";
    case FinishReason::stop: return "stop";
    case FinishReason::context: return "length";  // OpenAI reports a full context as length
  }
  return "length";
}

std::optional<RequestProblem> check_prompt(const ModelInfo& info, const std::vector<int32_t>& prompt, bool generates) {
  if (prompt.empty()) return RequestProblem{"prompt", "the prompt is empty"};
  for (int32_t id : prompt)
    if (id < 0 || id >= info.vocab_size)
      return RequestProblem{"prompt", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                          std::to_string(info.vocab_size) + ")"};
  if (int64_t(prompt.size()) + (generates ? 1 : 0) > info.max_context)
    return RequestProblem{"prompt", "the prompt has " + std::to_string(prompt.size()) +
                                        " tokens; the context holds " + std::to_string(info.max_context) +
                                        (generates ? ", including at least one generated token" : "")};
  return std::nullopt;
}

std::optional<RequestProblem> check_request(const ModelInfo& info, const GenerateRequest& request) {
  // max_tokens 0 (a prompt filled for its logprobs) may take the whole context.
  if (auto problem = check_prompt(info, request.prompt, request.max_tokens != 0)) return problem;
  if (request.max_tokens < 0) return RequestProblem{"max_tokens", "max_tokens must not be negative"};
  if (request.top_logprobs < -1 || request.top_logprobs > 20 || request.prompt_logprobs < -1 ||
      request.prompt_logprobs > 20)
    return RequestProblem{"logprobs", "logprobs must be between 0 and 20"};
  if (auto problem = sampling_problem(request.sampling)) return RequestProblem{problem->field, problem->message};
  std::string field;
  if (std::string message = logit_adjustments_problem(request.adjust, info.vocab_size, &field); !message.empty())
    return RequestProblem{field, message};
  if (request.think_budget >= 0 && (request.think_close < 0 || request.think_close >= info.vocab_size))
    return RequestProblem{"max_reasoning_tokens", "a thinking budget needs the id that ends thinking"};
  if (request.grammar && request.grammar->vocabulary().size() != info.vocab_size)
    return RequestProblem{"response_format", "the grammar's vocabulary is not this model's"};
  return std::nullopt;
}

void append_single_token_mask(int64_t vocab, int32_t id, std::vector<uint32_t>& bits) {
  const size_t first = bits.size();
  bits.resize(first + size_t((vocab + 31) / 32), 0);
  bits[first + (size_t(id) >> 5)] |= uint32_t(1) << (id & 31);
}

std::optional<FinishReason> finish_after(const ModelInfo& info, const GenerateRequest& request, int32_t id,
                                         int64_t generated, int64_t position, const Constraint* grammar) {
  const auto& eos = info.eos_ids;
  if (!request.ignore_eos && std::find(eos.begin(), eos.end(), id) != eos.end()) return FinishReason::stop;
  if (grammar && grammar->complete()) return FinishReason::stop;
  if (generated >= request.max_tokens) return FinishReason::length;
  if (position + 1 >= info.max_context) return FinishReason::context;
  return std::nullopt;
}

int64_t stream_length_bound(const ModelInfo& info, const GenerateRequest& request) {
  return std::min<int64_t>(info.max_context, int64_t(request.prompt.size()) + request.max_tokens);
}

}  // namespace lockstep
