// Picks the next token from one row of logits: greedy, or temperature with top-k, top-p and
// min-p. Each draw is uniform_at(seed, position), so a seeded reply is the same under any
// batching, call order or interleaving of requests (docs/architecture.md, "Seeded sampling").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace lockstep {

// How to pick a token. Check with validate() before use.
struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax; ties go to the lowest id); else (0, 100]
  int top_k = 0;             // 0 or -1: off; keep the k highest logits (k >= vocab is also off)
  float top_p = 1.0f;        // 1: off; keep the fewest most probable tokens of mass >= top_p
  float min_p = 0.0f;        // 0: off; drop tokens whose prob < min_p * the top prob
  uint64_t seed = 0;         // keys the draws; unused when greedy
};

// How to pick the token of one logit row: the request's settings and the position of the token
// being chosen (the draw's key).
struct SampleRow {
  SamplingParams params;
  int64_t position = 0;
};

// The first field out of range, with a message that names it and its value. Ranges:
// temperature in [0, 100] (finite), top_k >= -1, top_p in (0, 1], min_p in [0, 1]; NaN is out
// of range.
struct SamplingProblem {
  const char* field;  // "temperature", "top_k", "top_p" or "min_p"
  std::string message;
};
[[nodiscard]] std::optional<SamplingProblem> sampling_problem(const SamplingParams& params);

// Success, or sampling_problem's message.
[[nodiscard]] Status validate(const SamplingParams& params);

// A seed for a request that gave none, from std::random_device (not reproducible). The caller
// reports it back so that the reply can be reproduced; it is below 2^53, so a JavaScript client
// (whose numbers are doubles) can send it back unchanged.
[[nodiscard]] uint64_t fresh_seed();

// The id of the largest logit; ties go to the lowest id; NaN is ignored. Returns 0 when every
// logit is NaN or -inf. logits: [vocab], vocab > 0.
[[nodiscard]] int32_t argmax_row(const float* logits, int vocab);

// Picks tokens for one row of logits at a time. Holds a workspace sized once for the vocab, so
// sample() does not allocate. Not thread-safe: use one per thread.
//
// With temperature T > 0, sample() is exactly this (NaN counts as -inf):
//  1. Weights: w = floor(exp((logit - max_logit) / T) * 2^52), exp in double, an integer in
//     [0, 2^52]; the top token has 2^52. If some logit is +inf, those tokens get 2^52 and the
//     rest 0. Tokens of weight 0 are never picked. If every logit is NaN or -inf, returns 0.
//  2. Order: logit descending, ties by lower id; this is also weight (probability) descending.
//  3. top-k keeps the first k. top-p keeps the shortest prefix of that with weight sum
//     >= top_p * (the top-k sum), at least one token. min-p keeps w >= min_p * 2^52. Each keeps
//     a prefix of the order, so the kept set is the shortest of the three.
//  4. Draw: r = uniform_at(seed, position, kTokenStream) * 2^53, an integer. With Z the kept
//     weight sum, returns the first kept token whose prefix sum exceeds floor(r * Z / 2^53).
// Sums are exact integers, so no step depends on summation order and no full sort is needed:
// the result is a pure function of the logits, params and position. The price of fixed point:
// weights below 2^-52 of the top round to 0 (at T = 1, logits over 36 below the max).
class Sampler {
 public:
  static constexpr uint32_t kTokenStream = 0;  // the uniform_at stream of token draws

  // vocab_size > 0.
  explicit Sampler(int vocab_size);

  int vocab_size() const { return vocab_size_; }

  // logits: [vocab_size]. params must pass validate(). position: the position in the sequence
  // of the token being chosen (>= 0). Returns a token id in [0, vocab_size).
  [[nodiscard]] int32_t sample(const float* logits, const SamplingParams& params,
                               int64_t position);

 private:
  // Exact weight sums: up to 2^31 weights of at most 2^52.
  using WideSum = unsigned __int128;

  struct Candidate {
    float logit;
    int32_t id;
    uint64_t weight;  // fixed point, 2^52 for the top token
  };

  // The order of step 2: logit descending, ties by lower id.
  static bool ranks_before(const Candidate& a, const Candidate& b);
  // Fills candidates_ with the tokens of nonzero weight, in id order; returns their count.
  size_t fill_candidates(const float* logits, double temperature);
  // The smallest n whose best-n weight sum reaches goal: buckets the weights by bit width, then
  // a weighted quickselect inside one bucket; expected O(end), no full sort. Requires
  // candidates_[0, end) to be the best `end` (any order), summing to >= goal > 0. Leaves
  // candidates_[0, n) the best n, with the n-th best at n - 1.
  size_t select_prefix(size_t end, WideSum goal);

  int vocab_size_;
  std::vector<Candidate> candidates_;  // [vocab_size]; per call, the tokens of nonzero weight
};

}  // namespace lockstep
