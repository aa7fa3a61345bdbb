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
  return validate(request.sampling);
}

int64_t stream_length_bound(const ModelInfo& info, const GenerateRequest& request) {
  return std::min<int64_t>(info.max_context, int64_t(request.prompt.size()) + request.max_tokens);
}

}  // namespace lockstep
