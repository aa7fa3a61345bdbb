#include "lanes/recording_model.h"

#include <cmath>

namespace lockstep {

RecordingModel::RecordingModel(int64_t vocab, int64_t max_rows, int64_t max_context, int32_t page_size,
                               int32_t kv_pages, int32_t state_slots, int32_t end_id)
    : backend_(1) {
  info_.architecture = "RecordingModel";
  info_.vocab_size = vocab;
  info_.max_rows = max_rows;
  info_.max_context = max_context;
  info_.page_size = page_size;
  info_.kv_pages = kv_pages;
  info_.state_slots = state_slots;
  if (end_id >= 0) info_.eos_ids = {end_id};
  logits_ = backend_.alloc(DType::f32, {max_rows, vocab});
}

int32_t RecordingModel::next_id(int32_t token, int32_t position, int64_t vocab) {
  return int32_t((int64_t(token) * 31 + int64_t(position) * 7 + 3) % vocab);
}

Expected<Tensor> RecordingModel::forward(const ForwardBatch& batch) {
  LOCKSTEP_TRY(check_batch(batch));
  Call call{batch.tokens, batch.positions, batch.row_seq, batch.seq_slots, batch.logit_rows, batch.seq_pages.size()};
  calls.push_back(std::move(call));
  const int64_t vocab = info_.vocab_size;
  Tensor out = logits_.view().first_dim_slice(0, int64_t(batch.logit_rows.size()));
  for (size_t i = 0; i < batch.logit_rows.size(); ++i) {
    int32_t row = batch.logit_rows[i];
    int32_t favoured = next_id(batch.tokens[size_t(row)], batch.positions[size_t(row)], vocab);
    float* logits = out.as<float>() + int64_t(i) * vocab;
    for (int64_t v = 0; v < vocab; ++v) logits[v] = -std::fabs(float(v - favoured)) * 0.25f;
  }
  return out;
}

}  // namespace lockstep
