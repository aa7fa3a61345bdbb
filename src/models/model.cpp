#include "models/model.h"

namespace lockstep {

Status Model::check_batch(const ForwardBatch& batch) const {
  const size_t n = batch.tokens.size();
  if (n == 0) return make_error("a forward pass needs at least one row");
  if (int64_t(n) > info_.max_rows)
    return make_error("a forward pass of " + std::to_string(n) + " rows exceeds the model's " +
                      std::to_string(info_.max_rows));
  if (batch.positions.size() != n || batch.row_seq.size() != n)
    return make_error("tokens, positions and row_seq must have one entry per row");
  if (int64_t(batch.logit_rows.size()) > info_.max_rows)
    return make_error("too many logit rows");
  for (size_t r = 0; r < n; ++r) {
    if (batch.tokens[r] < 0 || batch.tokens[r] >= info_.vocab_size)
      return make_error("token id " + std::to_string(batch.tokens[r]) + " is outside the vocabulary [0, " +
                        std::to_string(info_.vocab_size) + ")");
    if (batch.positions[r] < 0 || batch.positions[r] >= info_.max_context)
      return make_error("position " + std::to_string(batch.positions[r]) + " is outside the context of " +
                        std::to_string(info_.max_context));
    if (batch.row_seq[r] < 0 || size_t(batch.row_seq[r]) >= batch.seq_pages.size())
      return make_error("row_seq names no sequence");
    const PageTable* table = batch.seq_pages[size_t(batch.row_seq[r])];
    if (int64_t(table->pages.size()) * info_.page_size <= batch.positions[r])
      return make_error("a sequence's page table does not reach position " + std::to_string(batch.positions[r]));
  }
  for (int32_t row : batch.logit_rows)
    if (row < 0 || size_t(row) >= n) return make_error("a logit row is outside the batch");
  return Status::success();
}

}  // namespace lockstep
