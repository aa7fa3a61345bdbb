#include "lanes/recording_runner.h"

namespace lockstep {

RecordingRunner::RecordingRunner(int64_t vocab, int64_t max_rows, int64_t max_context, int32_t page_size,
                                 int32_t kv_pages, int32_t state_slots, int32_t end_id) {
  info_.architecture = "RecordingRunner";
  info_.vocab_size = vocab;
  info_.max_rows = max_rows;
  info_.max_context = max_context;
  info_.page_size = page_size;
  info_.kv_pages = kv_pages;
  info_.state_slots = state_slots;
  if (end_id >= 0) info_.eos_ids = {end_id};
}

int32_t RecordingRunner::next_id(int32_t token, int32_t position, int64_t vocab) {
  return int32_t((int64_t(token) * 31 + int64_t(position) * 7 + 3) % vocab);
}

Status RecordingRunner::run(const StepPlan& plan, StepResult& result) {
  const ForwardBatch& batch = plan.batch;
  const size_t rows = batch.tokens.size(), picks = batch.logit_rows.size();
  if (rows == 0 || int64_t(rows) > info_.max_rows) return make_error("a plan needs 1 to max_rows rows");
  if (batch.positions.size() != rows || batch.row_seq.size() != rows)
    return make_error("tokens, positions and row_seq must have one entry per row");
  if (plan.samples.size() != picks || plan.top_logprobs.size() != picks)
    return make_error("samples and top_logprobs must have one entry per logit row");
  calls.push_back({batch.tokens, batch.positions, batch.row_seq, batch.seq_slots, batch.logit_rows,
                   batch.seq_pages.size()});
  result.ids.resize(picks);
  result.logprobs.resize(picks);
  for (size_t i = 0; i < picks; ++i) {
    const size_t row = size_t(batch.logit_rows[i]);
    if (row >= rows) return make_error("a logit row is outside the plan");
    result.ids[i] = next_id(batch.tokens[row], batch.positions[row], info_.vocab_size);
    result.logprobs[i] = {result.ids[i], 0.0f, {}};
  }
  return Status::success();
}

}  // namespace lockstep
