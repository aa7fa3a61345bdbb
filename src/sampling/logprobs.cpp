#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lockstep {

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
    if (!(value > -std::numeric_limits<float>::infinity())) continue;  // ruled out by a grammar
    if (int32_t(out.top.size()) == top && (top == 0 || !(value > out.top.back().second))) continue;
    auto at = std::upper_bound(out.top.begin(), out.top.end(), value,
                               [](float v, const std::pair<int32_t, float>& e) { return v > e.second; });
    out.top.insert(at, {int32_t(i), value});
    if (int32_t(out.top.size()) > top) out.top.pop_back();
  }
  for (auto& entry : out.top) entry.second = float(double(entry.second) - log_sum);
}

}  // namespace lockstep
