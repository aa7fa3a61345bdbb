#include "runner/model_runner.h"

#include <algorithm>

namespace lockstep {

ModelRunner::ModelRunner(Model& model) : model_(model) {
  chosen_ids_ = model.backend().alloc(DType::i32, {std::max<int64_t>(1, model.info().max_rows)});
}

Status ModelRunner::run(const StepPlan& plan, StepResult& result) {
  const size_t n = plan.batch.logit_rows.size();
  if (plan.samples.size() != n || plan.top_logprobs.size() != n)
    return make_error("a step plan needs one sampling entry and one logprobs entry per logit row");
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
  const int64_t vocab = model_.info().vocab_size;
  for (size_t i = 0; i < n; ++i) {
    if (plan.top_logprobs[i] < 0) continue;  // only these rows' logits leave the backend
    logits_.resize(size_t(vocab));
    backend.download(logits_.data(), logits->first_dim_slice(int64_t(i), 1));
    compute_logprobs(logits_.data(), vocab, result.ids[i], plan.top_logprobs[i], result.logprobs[i]);
  }
  return Status::success();
}

}  // namespace lockstep
