// What a client asks of one stream, and how a stream ends.
#pragma once

#include <cstdint>
#include <utility>
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
  int32_t top_logprobs = -1; // -1: no logprobs; 0..20: report each chosen id's logprob and this many alternatives
};

// The log-probabilities (log-softmax of the raw logits) around one chosen id.
struct TokenLogprobs {
  int32_t id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // the most likely ids, best first, ties to the lower id
};

// Fills `out` for the id chosen from `logits` [vocab]; `top` alternatives.
void compute_logprobs(const float* logits, int64_t vocab, int32_t id, int32_t top, TokenLogprobs& out);

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
