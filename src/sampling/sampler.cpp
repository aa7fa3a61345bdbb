#include "sampling/sampler.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

#include "base/philox.h"
#include "sampling/draw_math.h"

namespace lockstep {
namespace {

using draw::kTopWeight;
using draw::kZeroWeightExponent;
using WideSum = draw::WideSum;

constexpr double kMaxTemperature = 100.0;
constexpr size_t kScanSize = 64;  // select_prefix sorts and scans ranges this small
constexpr int kBuckets = 54;      // bit widths of weights in [1, 2^52]

std::string show(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace

std::optional<SamplingProblem> sampling_problem(const SamplingParams& params) {
  if (!(params.temperature >= 0.0f && params.temperature <= kMaxTemperature))
    return SamplingProblem{"temperature", "temperature must be in [0, 100], got " + show(params.temperature)};
  if (params.top_k < -1)
    return SamplingProblem{"top_k", "top_k must be >= -1 (0 or -1: off), got " + std::to_string(params.top_k)};
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f))
    return SamplingProblem{"top_p", "top_p must be in (0, 1] (1: off), got " + show(params.top_p)};
  if (!(params.min_p >= 0.0f && params.min_p <= 1.0f))
    return SamplingProblem{"min_p", "min_p must be in [0, 1] (0: off), got " + show(params.min_p)};
  return std::nullopt;
}

Status validate(const SamplingParams& params) {
  if (auto problem = sampling_problem(params)) return make_error(problem->message);
  return Status::success();
}

uint64_t fresh_seed() {
  std::random_device device;
  const uint64_t high = device();
  return (high << 32 | uint32_t(device())) & ((uint64_t(1) << 53) - 1);
}

int32_t argmax_row(const float* logits, int vocab) {
  int32_t best = 0;
  float best_logit = -std::numeric_limits<float>::infinity();
  for (int32_t id = 0; id < vocab; ++id) {
    if (logits[id] > best_logit) {  // false for NaN; strict, so ties keep the lower id
      best = id;
      best_logit = logits[id];
    }
  }
  return best;
}

Sampler::Sampler(int vocab_size) : vocab_size_(vocab_size), candidates_(size_t(vocab_size)) {
  assert(vocab_size > 0);
}

size_t Sampler::fill_candidates(const float* logits, double temperature) {
  constexpr float kInfinity = std::numeric_limits<float>::infinity();
  const float max_logit = logits[argmax_row(logits, vocab_size_)];
  if (!(max_logit > -kInfinity)) return 0;  // every logit NaN or -inf
  size_t count = 0;
  if (max_logit == kInfinity) {
    for (int32_t id = 0; id < vocab_size_; ++id) {
      if (logits[id] == kInfinity) candidates_[count++] = {logits[id], id, kTopWeight};
    }
    return count;
  }
  for (int32_t id = 0; id < vocab_size_; ++id) {
    const float logit = logits[id];
    if (!(logit > -kInfinity)) continue;  // NaN or -inf
    const double exponent = (double(logit) - double(max_logit)) / temperature;
    if (exponent < kZeroWeightExponent) continue;
    const auto weight = uint64_t(std::exp(exponent) * 0x1p52);  // scaling by 2^52 is exact
    if (weight != 0) candidates_[count++] = {logit, id, weight};
  }
  return count;
}

bool Sampler::ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

size_t Sampler::select_prefix(size_t end, WideSum goal) {
  const auto at = [&](size_t i) { return candidates_.begin() + std::ptrdiff_t(i); };
  const auto bucket = [](const Candidate& c) { return int(std::bit_width(c.weight)); };
  // Bucket the weights by bit width (1 to 53). A heavier bucket holds only tokens of higher
  // logits, so each bucket is a run of the order; find the bucket where the sum reaches goal.
  WideSum bucket_sums[kBuckets] = {};
  for (size_t i = 0; i < end; ++i) bucket_sums[bucket(candidates_[i])] += candidates_[i].weight;
  int target_bucket = kBuckets - 1;
  WideSum before = 0;  // the sum of the heavier buckets
  while (target_bucket > 1 && before + bucket_sums[target_bucket] < goal) {
    before += bucket_sums[target_bucket--];
  }
  // The answer n lies in (low, high]; candidates_[0, low) are the best low, summing to before.
  const size_t high_end = size_t(std::partition(at(0), at(end), [&](const Candidate& c) {
                                   return bucket(c) >= target_bucket;
                                 }) - at(0));
  size_t low = size_t(std::partition(at(0), at(high_end), [&](const Candidate& c) {
                         return bucket(c) > target_bucket;
                       }) - at(0));
  size_t high = high_end;
  while (high - low > kScanSize) {
    const size_t middle = low + (high - low) / 2;
    std::nth_element(at(low), at(middle), at(high), ranks_before);
    WideSum upper = 0;
    for (size_t i = low; i < middle; ++i) upper += candidates_[i].weight;
    if (before + upper >= goal) {
      high = middle;
    } else {
      before += upper;
      low = middle;
    }
  }
  std::sort(at(low), at(high), ranks_before);
  for (size_t i = low; i < high; ++i) {
    before += candidates_[i].weight;
    if (before >= goal) return i + 1;
  }
  assert(false && "the weights of candidates_[0, end) sum to less than the goal");
  return high;
}

int32_t Sampler::sample(const float* logits, const SamplingParams& params, int64_t position) {
  assert(validate(params).ok());
  assert(position >= 0);
  if (params.temperature == 0.0f) return argmax_row(logits, vocab_size_);

  const size_t count = fill_candidates(logits, double(params.temperature));
  if (count == 0) return 0;
  const auto at = [&](size_t i) { return candidates_.begin() + std::ptrdiff_t(i); };
  const auto sum_of_first = [&](size_t n) {
    WideSum sum = 0;
    for (size_t i = 0; i < n; ++i) sum += candidates_[i].weight;
    return sum;
  };

  // Each step keeps the best `kept` candidates, moved to candidates_[0, kept) in any order.
  size_t kept = count;
  if (params.top_k > 0 && size_t(params.top_k) < kept) {
    kept = size_t(params.top_k);
    std::nth_element(at(0), at(kept), at(count), ranks_before);
  }
  WideSum kept_total = sum_of_first(kept);
  if (params.top_p < 1.0f) {
    kept = select_prefix(kept, draw::mass_threshold(std::bit_cast<uint32_t>(params.top_p), kept_total));
    kept_total = sum_of_first(kept);
  }
  if (params.min_p > 0.0f) {
    const double min_weight = double(params.min_p) * 0x1p52;  // exact: a float times 2^52
    // Weights fall along the order, so the tokens kept by min-p are a prefix of it too.
    kept = size_t(std::partition(at(0), at(kept), [&](const Candidate& c) {
                    return double(c.weight) >= min_weight;
                  }) - at(0));
    kept_total = sum_of_first(kept);
  }

  const double draw = uniform_at(params.seed, uint64_t(position), kTokenStream);
  const auto r = uint64_t(draw * 0x1p53);  // exact: the draw is a multiple of 2^-53
  // The first token whose prefix sum exceeds the target, i.e. reaches target + 1.
  const size_t n = select_prefix(kept, draw::scale_by_draw(r, kept_total) + 1);
  return candidates_[n - 1].id;
}

}  // namespace lockstep
