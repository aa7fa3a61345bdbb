// What a client asks of one stream, and how a stream ends.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "models/model.h"
#include "sampling/sampler.h"

namespace lockstep {

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  SamplingParams sampling;
  bool ignore_eos = false;  // keep going past end ids (reference runs, benchmarks)
};

enum class FinishReason {
  length,   // max_tokens generated
  stop,     // an end-of-sequence id
  context,  // the context is full
};

const char* finish_reason_name(FinishReason reason);

struct GenerateResult {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::length;
};

// Checks a request against the model before anything runs: a non-empty prompt of ids in the
// vocabulary that leaves room for at least one generated token, max_tokens >= 1, and valid
// sampling settings.
[[nodiscard]] Status check_request(const ModelInfo& info, const GenerateRequest& request);

// Positions a stream may reach: its prompt plus max_tokens, capped by the context.
int64_t stream_length_bound(const ModelInfo& info, const GenerateRequest& request);

}  // namespace lockstep
