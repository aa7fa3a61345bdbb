// Penalties and logit_bias: what a request asks to change in its logits before each draw. Each
// change is computed from the stream's own tokens alone, and applied to its own row, so a
// stream's tokens still depend on nothing else (the exactness contract).
//
// For a token t of a row, with c the times t was generated so far in the stream:
//   x = logit[t]
//   if repetition != 1 and t is in the prompt or was generated: x = x > 0 ? x / repetition : x * repetition
//   x = x - presence * (c > 0) - frequency * c     (OpenAI's penalties: generated tokens only)
//   x = x + bias[t]                                (logit_bias)
// in float, in that order, on every backend.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lockstep {

struct LogitAdjustments {
  float presence = 0.0f;    // [-2, 2]
  float frequency = 0.0f;   // [-2, 2]
  float repetition = 1.0f;  // (0, 10]; 1: off
  std::vector<std::pair<int32_t, float>> bias;  // logit_bias: (id, [-100, 100]), ids unique

  bool any() const { return presence != 0.0f || frequency != 0.0f || repetition != 1.0f || !bias.empty(); }
};

// One logit of one logit row to change, with everything the rule above needs.
struct LogitEdit {
  int32_t row = 0, token = 0;
  float count = 0.0f;       // c
  int32_t in_context = 0;   // 1: t is in the prompt or was generated
  float presence = 0.0f, frequency = 0.0f, repetition = 1.0f, bias = 0.0f;
};

inline float edited_logit(float x, const LogitEdit& e) {
  if (e.repetition != 1.0f && e.in_context) x = x > 0.0f ? x / e.repetition : x * e.repetition;
  x = x - e.presence * (e.count > 0.0f ? 1.0f : 0.0f) - e.frequency * e.count;
  return x + e.bias;
}

// The first value out of range, as "field: message", or empty.
std::string logit_adjustments_problem(const LogitAdjustments& adjust, int64_t vocab, std::string* field);

// A stream's tokens as the rule counts them: the prompt's (for repetition) and each generated
// id's count. edits() lists the changes for one logit row, one per token that needs one, in id
// order. Kept as those edits, updated per generated id, so a round copies them and nothing more.
class TokenCounts {
 public:
  TokenCounts(const LogitAdjustments& adjust, const std::vector<int32_t>& prompt);
  void add(int32_t generated);
  void edits(int32_t row, std::vector<LogitEdit>& out) const;

 private:
  // The edit of `token`, made (with the adjustments' values) if it has none yet.
  LogitEdit& at(int32_t token);

  LogitAdjustments adjust_;
  bool penalties_ = false;          // any penalty: generated ids are counted
  std::vector<LogitEdit> entries_;  // by token id
};

// Applies `edits` to one row of host logits (the alone runs' host sampling).
void apply_edits(float* logits, int64_t vocab, const std::vector<LogitEdit>& edits);

}  // namespace lockstep
