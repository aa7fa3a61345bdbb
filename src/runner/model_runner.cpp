#include "runner/model_runner.h"

#include <algorithm>
#include <limits>

namespace lockstep {

namespace {

constexpr int64_t kMaxTop = 20;  // the most alternatives a request may ask for (check_request)

// A view of `buffer` as [rows, cols].
Tensor as_matrix(const OwnedTensor& buffer, int64_t rows, int64_t cols) {
  Tensor view = buffer.view();
  view.shape = {rows, cols};
  return view;
}

}  // namespace

ModelRunner::ModelRunner(Model& model) : model_(model) {
  const int64_t rows = std::max<int64_t>(1, model.info().max_rows);
  Backend& backend = model.backend();
  chosen_ids_ = backend.alloc(DType::i32, {rows});
  chain_ids_ = backend.alloc(DType::i32, {rows});
  logprobs_ = backend.alloc(DType::f32, {rows * (1 + kMaxTop)});
  top_ids_ = backend.alloc(DType::i32, {rows * kMaxTop});
}

Status ModelRunner::run(const StepPlan& plan, StepResult& result) {
  const size_t n = plan.batch.logit_rows.size();
  if (plan.samples.size() != n || plan.top_logprobs.size() != n)
    return make_error("a step plan needs one sampling entry and one logprobs entry per logit row");
  for (int32_t asked : plan.top_logprobs)
    if (asked < -1 || asked > kMaxTop) return make_error("logprobs must be between 0 and 20");
  for (const SampleRow& row : plan.samples) LOCKSTEP_TRY(validate(row.params));
  for (const LogitEdit& edit : plan.edits)
    if (edit.row < 0 || size_t(edit.row) >= n || edit.token < 0 || edit.token >= info().vocab_size)
      return make_error("a logit edit names a row or token outside the plan");
  const int64_t mask_words = (info().vocab_size + 31) / 32;
  if (plan.mask_bits.size() != plan.mask_rows.size() * size_t(mask_words))
    return make_error("a step plan needs one token mask per masked row");
  for (int32_t row : plan.mask_rows)
    if (row < 0 || size_t(row) >= n) return make_error("a token mask names a row outside the plan");
  if (!plan.score_ids.empty() && plan.score_ids.size() != n)
    return make_error("a step plan's score ids are one per logit row, or none");
  for (int32_t id : plan.score_ids)
    if (id < -1 || id >= info().vocab_size) return make_error("a score id is outside the vocabulary");
  auto logits = model_.forward(plan.batch);
  if (!logits.ok()) return logits.error();
  result.ids.resize(n);
  result.logprobs.resize(n);
  if (n == 0) return Status::success();
  Backend& backend = model_.backend();
  // Penalties and logit_bias change the logits the draws and the logprobs see.
  if (!plan.edits.empty()) backend.edit_logits(*logits, plan.edits);
  // Then grammars: the tokens they do not allow cannot be drawn.
  if (!plan.mask_rows.empty()) backend.mask_logits(*logits, plan.mask_rows, plan.mask_bits);
  const Tensor ids = chosen_ids_.view().first_dim_slice(0, int64_t(n));
  backend.sample(*logits, plan.samples, ids);
  backend.download(result.ids.data(), ids);
  // Scoring rows take the id they score, and their logprobs are that id's.
  bool scores = false;
  for (size_t i = 0; i < plan.score_ids.size(); ++i)
    if (plan.score_ids[i] >= 0) result.ids[i] = plan.score_ids[i], scores = true;
  if (scores) backend.upload(ids, result.ids.data());
  int32_t top = -1;  // the most alternatives a row asked for; -1: no row asked for logprobs
  for (int32_t asked : plan.top_logprobs) top = std::max(top, asked);
  if (top < 0) return Status::success();
  // Every row's log-probabilities in one launch (a row's first k alternatives do not depend on
  // the launch's `top`), then each asking row takes its own.
  const int64_t rows = int64_t(n), width = 1 + top;
  const Tensor values = as_matrix(logprobs_, rows, width), alternatives = as_matrix(top_ids_, rows, top);
  backend.token_logprobs(*logits, ids, values, alternatives);
  logprobs_host_.resize(size_t(rows * width));
  top_ids_host_.resize(size_t(rows * top));
  backend.download(logprobs_host_.data(), values);
  if (top > 0) backend.download(top_ids_host_.data(), alternatives);
  for (size_t i = 0; i < n; ++i) {
    if (plan.top_logprobs[i] < 0) continue;
    TokenLogprobs& out = result.logprobs[i];
    const float* row = logprobs_host_.data() + int64_t(i) * width;
    out.id = result.ids[i];
    out.logprob = row[0];
    out.top.clear();
    const int32_t* alternative = top_ids_host_.data() + int64_t(i) * top;
    // Alternatives a grammar ruled out (-inf) are no alternatives.
    for (int64_t j = 0; j < plan.top_logprobs[i]; ++j)
      if (row[1 + j] > -std::numeric_limits<float>::infinity()) out.top.push_back({alternative[j], row[1 + j]});
  }
  return Status::success();
}

// The head's greedy pick at each logit row of `logits`, into picks_.
void ModelRunner::reserve_drafts(int64_t count) {
  if (!draft_ids_.empty() && draft_ids_.view().numel() >= count) return;
  draft_ids_ = model_.backend().alloc(DType::i32, {std::max<int64_t>(count, 64)});
}

void ModelRunner::pick_drafts(const Tensor& logits, size_t n, int64_t offset) {
  model_.backend().argmax(logits, draft_ids_.view().first_dim_slice(offset, int64_t(n)));
}

Status ModelRunner::draft(const DraftPlan& plan, std::vector<std::vector<int32_t>>& drafts) {
  const ForwardBatch& absorbed = plan.batch;
  const size_t n = absorbed.logit_rows.size();
  if (plan.depth.size() != n) return make_error("a draft plan needs one depth per logit row");
  int64_t total = 0;
  for (int32_t depth : plan.depth) {
    if (depth < 1) return make_error("a draft plan's depths must be at least 1");
    total += depth;
  }
  auto logits = model_.forward_draft(absorbed, Model::DraftInput::main_pass, plan.hidden_rows);
  if (!logits.ok()) return logits.error();
  drafts.assign(n, {});
  if (n == 0) return Status::success();
  // Every pass's picks stay on the device, the next pass reading its tokens from there; one
  // download at the end. owner_[j]: the logit row whose draft draft_ids_[j] is.
  Backend& backend = model_.backend();
  reserve_drafts(total);
  pick_drafts(*logits, n, 0);
  owner_.clear();
  // live_: the rows still drafting; from_: the row of the head's last pass that each continues;
  // at_: where in draft_ids_ its last draft is.
  live_.clear();
  from_.clear();
  at_.clear();
  for (size_t i = 0; i < n; ++i) {
    owner_.push_back(int32_t(i));
    if (plan.depth[i] > 1) live_.push_back(int32_t(i)), from_.push_back(absorbed.logit_rows[i]), at_.push_back(int32_t(i));
  }
  // Draft k + 1 of each row that wants it: one head row at the position after draft k's, fed
  // draft k and the hidden state that drafted it (a row of the head's last pass).
  const Tensor all_ids = draft_ids_.view();
  for (int32_t k = 1; !live_.empty(); ++k) {
    chain_.clear();
    next_live_.clear();
    next_from_.clear();
    next_at_.clear();
    for (size_t j = 0; j < live_.size(); ++j) {
      const size_t i = size_t(live_[j]);
      const int32_t row = absorbed.logit_rows[i], seq = absorbed.row_seq[size_t(row)];
      chain_.tokens.push_back(0);  // read from the device
      chain_.positions.push_back(absorbed.positions[size_t(row)] + k);
      chain_.row_seq.push_back(int32_t(j));
      chain_.seq_pages.push_back(absorbed.seq_pages[size_t(seq)]);
      if (!absorbed.seq_slots.empty()) chain_.seq_slots.push_back(absorbed.seq_slots[size_t(seq)]);
      chain_.logit_rows.push_back(int32_t(j));
    }
    // The tokens: the last pass's picks where the rows are its rows in order (one slice), else
    // copied together run by run.
    const int64_t live = int64_t(live_.size());
    Tensor tokens;
    if (at_.back() - at_.front() + 1 == live) {
      tokens = all_ids.first_dim_slice(at_.front(), live);
    } else {
      tokens = chain_ids_.view().first_dim_slice(0, live);
      for (int64_t j = 0, end; j < live; j = end) {
        for (end = j + 1; end < live && at_[size_t(end)] == at_[size_t(end - 1)] + 1;) ++end;
        backend.copy(chain_ids_.view().first_dim_slice(j, end - j), all_ids.first_dim_slice(at_[size_t(j)], end - j));
      }
    }
    auto chained = model_.forward_draft(chain_, Model::DraftInput::head_pass, from_, &tokens);
    if (!chained.ok()) return chained.error();
    const int64_t offset = int64_t(owner_.size());
    pick_drafts(*chained, live_.size(), offset);
    for (size_t j = 0; j < live_.size(); ++j) {
      const size_t i = size_t(live_[j]);
      owner_.push_back(int32_t(i));
      const int32_t made = k + 1;  // drafts row i has now
      if (made < plan.depth[i])
        next_live_.push_back(int32_t(i)), next_from_.push_back(int32_t(j)), next_at_.push_back(int32_t(offset + j));
    }
    live_.swap(next_live_);
    from_.swap(next_from_);
    at_.swap(next_at_);
  }
  picks_.resize(owner_.size());
  backend.download(picks_.data(), all_ids.first_dim_slice(0, int64_t(owner_.size())));
  for (size_t j = 0; j < owner_.size(); ++j) drafts[size_t(owner_[j])].push_back(picks_[j]);
  return Status::success();
}

}  // namespace lockstep
