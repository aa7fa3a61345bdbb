// Checks Sampler against a plain implementation of the rule in sampler.h: a full sort, then
// each step in turn. The sampler sorts in chunks and sums in other orders; the two must agree
// token for token.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "base/philox.h"
#include "sampling/sampler.h"

namespace lockstep {
namespace {

using Wide = unsigned __int128;

struct Token {
  float logit;
  int32_t id;
  uint64_t weight;
};

int32_t reference_sample(const std::vector<float>& logits, const SamplingParams& params,
                         int64_t position) {
  const int vocab = int(logits.size());
  if (params.temperature == 0.0f) return argmax_row(logits.data(), vocab);
  std::vector<Token> tokens;
  for (int32_t id = 0; id < vocab; ++id) {
    if (!std::isnan(logits[size_t(id)])) tokens.push_back({logits[size_t(id)], id, 0});
  }
  std::sort(tokens.begin(), tokens.end(), [](const Token& a, const Token& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  });
  if (tokens.empty() || tokens[0].logit == -std::numeric_limits<float>::infinity()) return 0;
  const double max_logit = tokens[0].logit;
  for (Token& token : tokens) {
    if (std::isinf(max_logit)) {
      token.weight = token.logit == tokens[0].logit ? uint64_t(1) << 52 : 0;
    } else {
      const double w = std::exp((double(token.logit) - max_logit) / params.temperature);
      token.weight = uint64_t(std::ldexp(w, 52));
    }
  }
  while (!tokens.empty() && tokens.back().weight == 0) tokens.pop_back();

  if (params.top_k > 0 && size_t(params.top_k) < tokens.size()) tokens.resize(size_t(params.top_k));
  Wide total = 0;
  for (const Token& token : tokens) total += token.weight;
  if (params.top_p < 1.0f) {
    // prefix >= top_p * total, as prefix * 2^shift >= mantissa * total (top_p >= 2^-20 here).
    int exponent = 0;
    const double fraction = std::frexp(params.top_p, &exponent);
    const int shift = 24 - exponent;
    EXPECT_LT(shift, 44);
    const Wide mantissa = uint64_t(std::ldexp(fraction, 24));
    Wide prefix = 0;
    size_t keep = 0;
    while (keep < tokens.size() && (keep == 0 || (prefix << shift) < mantissa * total)) {
      prefix += tokens[keep++].weight;
    }
    tokens.resize(keep);
  }
  if (params.min_p > 0.0f) {
    const double min_weight = double(params.min_p) * std::ldexp(1.0, 52);
    size_t keep = 0;
    while (keep < tokens.size() && double(tokens[keep].weight) >= min_weight) ++keep;
    tokens.resize(keep);
  }
  Wide kept_total = 0;
  for (const Token& token : tokens) kept_total += token.weight;
  const auto r = uint64_t(std::ldexp(uniform_at(params.seed, uint64_t(position)), 53));
  const Wide target = (Wide(r) * kept_total) >> 53;  // r * total < 2^123 for these vocabs
  Wide prefix = 0;
  for (const Token& token : tokens) {
    prefix += token.weight;
    if (prefix > target) return token.id;
  }
  ADD_FAILURE() << "reference found no token";
  return -1;
}

// Logits of several shapes: smooth, peaked, with many exact ties, with NaN and -inf holes.
std::vector<float> make_row(int vocab, int shape, uint64_t seed) {
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) {
    const double u = uniform_at(seed, uint64_t(i), 5);
    float& logit = logits[size_t(i)];
    switch (shape) {
      case 0: logit = float(4 * u); break;
      case 1: logit = float(-40 * u * u * u); break;
      case 2: logit = float(std::floor(6 * u)); break;
      default: logit = u < 0.1 ? std::numeric_limits<float>::quiet_NaN()
                     : u < 0.3 ? -std::numeric_limits<float>::infinity()
                               : float(20 * u);
    }
  }
  return logits;
}

TEST(SamplerReference, AgreesTokenForTokenOnManyRowsAndParams) {
  const float temperatures[] = {0.0f, 0.3f, 1.0f, 2.5f};
  const int top_ks[] = {0, 1, 3, 200};
  const float top_ps[] = {1.0f, 0.95f, 0.5f, 0.01f};
  const float min_ps[] = {0.0f, 0.01f, 0.3f};
  int checked = 0;
  for (int vocab : {1, 7, 100, 3000}) {
    Sampler sampler(vocab);
    for (int shape = 0; shape < 4; ++shape) {
      const std::vector<float> logits = make_row(vocab, shape, uint64_t(vocab * 10 + shape));
      for (float temperature : temperatures)
        for (int top_k : top_ks)
          for (float top_p : top_ps)
            for (float min_p : min_ps) {
              const SamplingParams params{temperature, top_k, top_p, min_p, uint64_t(checked)};
              ASSERT_TRUE(validate(params).ok());
              for (int64_t position = 0; position < 3; ++position) {
                ASSERT_EQ(sampler.sample(logits.data(), params, position),
                          reference_sample(logits, params, position))
                    << "vocab " << vocab << " shape " << shape << " T " << temperature
                    << " top_k " << top_k << " top_p " << top_p << " min_p " << min_p
                    << " position " << position;
                ++checked;
              }
            }
    }
  }
  EXPECT_EQ(checked, 4 * 4 * 4 * 4 * 4 * 3 * 3);
}

TEST(SamplerReference, AgreesOnALargeVocab) {
  constexpr int kVocab = 262144;
  const std::vector<float> logits = make_row(kVocab, 0, 31);  // flat: the draw lands anywhere
  Sampler sampler(kVocab);
  SamplingParams params{1.0f, 0, 1.0f, 0.0f, 8};
  const auto start = std::chrono::steady_clock::now();
  std::vector<int32_t> tokens;
  for (int64_t position = 0; position < 8; ++position) {
    tokens.push_back(sampler.sample(logits.data(), params, position));
  }
  const std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  std::printf("[ info     ] %.2f ms per sample, vocab %d, flat logits\n", elapsed.count() / 8,
              kVocab);
  for (int64_t position = 0; position < 8; ++position) {
    EXPECT_EQ(tokens[size_t(position)], reference_sample(logits, params, position));
  }
  params.top_k = 50;
  params.top_p = 0.9f;
  params.min_p = 0.05f;
  EXPECT_EQ(sampler.sample(logits.data(), params, 3), reference_sample(logits, params, 3));
}

}  // namespace
}  // namespace lockstep
