#include "sampling/logit_edits.h"

#include <algorithm>
#include <cmath>

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
  penalties_ = adjust.presence != 0.0f || adjust.frequency != 0.0f || adjust.repetition != 1.0f;
  if (adjust.repetition != 1.0f)
    for (int32_t token : prompt) at(token).in_context = 1;
  for (auto [token, value] : adjust.bias) at(token).bias = value;
}

LogitEdit& TokenCounts::at(int32_t token) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), token,
                             [](const LogitEdit& edit, int32_t id) { return edit.token < id; });
  if (it != entries_.end() && it->token == token) return *it;
  LogitEdit edit;
  edit.token = token;
  edit.presence = adjust_.presence;
  edit.frequency = adjust_.frequency;
  edit.repetition = adjust_.repetition;
  return *entries_.insert(it, edit);
}

void TokenCounts::add(int32_t generated) {
  if (!penalties_) return;
  LogitEdit& edit = at(generated);
  edit.count += 1.0f;
  edit.in_context = 1;
}

void TokenCounts::edits(int32_t row, std::vector<LogitEdit>& out) const {
  for (LogitEdit edit : entries_) {
    edit.row = row;
    out.push_back(edit);
  }
}

void apply_edits(float* logits, int64_t vocab, const std::vector<LogitEdit>& edits) {
  for (const LogitEdit& edit : edits)
    if (edit.token >= 0 && edit.token < vocab) logits[edit.token] = edited_logit(logits[edit.token], edit);
}

}  // namespace lockstep
