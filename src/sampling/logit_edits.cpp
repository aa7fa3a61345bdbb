#include "sampling/logit_edits.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace lockstep {

std::string logit_adjustments_problem(const LogitAdjustments& adjust, int64_t vocab, std::string* field) {
  auto out_of = [&](const char* name, const std::string& message) {
    if (field) *field = name;
    return std::string(name) + " " + message;
  };
  if (!(adjust.presence >= -2.0f && adjust.presence <= 2.0f))
    return out_of("presence_penalty", "must be between -2 and 2");
  if (!(adjust.frequency >= -2.0f && adjust.frequency <= 2.0f))
    return out_of("frequency_penalty", "must be between -2 and 2");
  if (!(adjust.repetition > 0.0f && adjust.repetition <= 10.0f))
    return out_of("repetition_penalty", "must be above 0 and at most 10");
  for (auto [id, value] : adjust.bias) {
    if (id < 0 || id >= vocab)
      return out_of("logit_bias", "names token id " + std::to_string(id) + ", outside the vocabulary [0, " +
                                      std::to_string(vocab) + ")");
    if (!(value >= -100.0f && value <= 100.0f)) return out_of("logit_bias", "values must be between -100 and 100");
  }
  return "";
}

TokenCounts::TokenCounts(const LogitAdjustments& adjust, const std::vector<int32_t>& prompt) : adjust_(adjust) {
  if (adjust.repetition != 1.0f) {
    context_ = prompt;
    std::sort(context_.begin(), context_.end());
    context_.erase(std::unique(context_.begin(), context_.end()), context_.end());
  }
}

void TokenCounts::add(int32_t generated) { ++generated_[generated]; }

void TokenCounts::edits(int32_t row, std::vector<LogitEdit>& out) const {
  // Every token with something to change, in id order: the generated ones, the prompt's (for
  // repetition) and the biased ones.
  std::map<int32_t, LogitEdit> by_token;
  auto at = [&](int32_t token) -> LogitEdit& {
    LogitEdit& edit = by_token[token];
    edit.row = row;
    edit.token = token;
    edit.presence = adjust_.presence;
    edit.frequency = adjust_.frequency;
    edit.repetition = adjust_.repetition;
    return edit;
  };
  const bool penalties = adjust_.presence != 0.0f || adjust_.frequency != 0.0f || adjust_.repetition != 1.0f;
  if (penalties)
    for (auto [token, count] : generated_) {
      LogitEdit& edit = at(token);
      edit.count = float(count);
      edit.in_context = 1;
    }
  for (int32_t token : context_) at(token).in_context = 1;
  for (auto [token, value] : adjust_.bias) at(token).bias = value;
  for (auto& [token, edit] : by_token) out.push_back(edit);
}

void apply_edits(float* logits, int64_t vocab, const std::vector<LogitEdit>& edits) {
  for (const LogitEdit& edit : edits)
    if (edit.token >= 0 && edit.token < vocab) logits[edit.token] = edited_logit(logits[edit.token], edit);
}

}  // namespace lockstep
