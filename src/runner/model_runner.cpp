#include "runner/model_runner.h"

#include <algorithm>

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
  auto logits = model_.forward(plan.batch);
  if (!logits.ok()) return logits.error();
  result.ids.resize(n);
  result.logprobs.resize(n);
  if (n == 0) return Status::success();
  Backend& backend = model_.backend();
  const Tensor ids = chosen_ids_.view().first_dim_slice(0, int64_t(n));
  backend.sample(*logits, plan.samples, ids);
  backend.download(result.ids.data(), ids);
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
    for (int64_t j = 0; j < plan.top_logprobs[i]; ++j) out.top.push_back({alternative[j], row[1 + j]});
  }
  return Status::success();
}

}  // namespace lockstep
