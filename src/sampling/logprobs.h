// Log-probabilities of a chosen token and its best alternatives, from one row of raw logits.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace lockstep {

// The log-probabilities (log-softmax of the raw logits) around one chosen id.
struct TokenLogprobs {
  int32_t id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // the most likely ids, best first, ties to the lower id
};

// Fills `out` for the id chosen from `logits` [vocab]; `top` alternatives.
void compute_logprobs(const float* logits, int64_t vocab, int32_t id, int32_t top, TokenLogprobs& out);

}  // namespace lockstep
