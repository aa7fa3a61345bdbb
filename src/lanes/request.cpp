#include "lanes/request.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lockstep {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::length: return "length";
    case FinishReason::stop: return "stop";
    case FinishReason::context: return "length";  // OpenAI reports a full context as length
  }
  return "length";
}

Status check_request(const ModelInfo& info, const GenerateRequest& request) {
  if (request.prompt.empty()) return make_error("the prompt is empty");
  for (int32_t id : request.prompt)
    if (id < 0 || id >= info.vocab_size)
      return make_error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                        std::to_string(info.vocab_size) + ")");
  if (int64_t(request.prompt.size()) >= info.max_context)
    return make_error("the prompt has " + std::to_string(request.prompt.size()) +
                      " tokens; the context holds " + std::to_string(info.max_context) +
                      " including at least one generated token");
  if (request.max_tokens < 1) return make_error("max_tokens must be at least 1");
  if (request.top_logprobs < -1 || request.top_logprobs > 20) return make_error("logprobs must be between 0 and 20");
  return validate(request.sampling);
}

void compute_logprobs(const float* logits, int64_t vocab, int32_t id, int32_t top, TokenLogprobs& out) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i)
    if (logits[i] > max) max = logits[i];
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - max);
  const double log_sum = double(max) + std::log(sum);
  out.id = id;
  out.logprob = float(double(logits[id]) - log_sum);
  out.top.clear();
  for (int64_t i = 0; i < vocab; ++i) {
    float value = logits[i];
    if (int32_t(out.top.size()) == top && (top == 0 || !(value > out.top.back().second))) continue;
    auto at = std::upper_bound(out.top.begin(), out.top.end(), value,
                               [](float v, const std::pair<int32_t, float>& e) { return v > e.second; });
    out.top.insert(at, {int32_t(i), value});
    if (int32_t(out.top.size()) > top) out.top.pop_back();
  }
  for (auto& entry : out.top) entry.second = float(double(entry.second) - log_sum);
}

int64_t stream_length_bound(const ModelInfo& info, const GenerateRequest& request) {
  return std::min<int64_t>(info.max_context, int64_t(request.prompt.size()) + request.max_tokens);
}

}  // namespace lockstep
