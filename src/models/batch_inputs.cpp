#include "models/batch_inputs.h"

#include <algorithm>

namespace lockstep {

BatchInputs::BatchInputs(Backend& backend, int64_t max_rows, int64_t max_pages, int32_t page_size)
    : max_pages_(max_pages), page_size_(page_size) {
  ids_ = backend.alloc(DType::i32, {max_rows});
  positions_ = backend.alloc(DType::i32, {max_rows});
  row_seq_ = backend.alloc(DType::i32, {max_rows});
  slots_ = backend.alloc(DType::i32, {max_rows});
  logit_rows_ = backend.alloc(DType::i32, {max_rows});
  page_tables_ = backend.alloc(DType::i32, {max_rows, max_pages});
  seq_begin_ = backend.alloc(DType::i32, {max_rows + 1});
  seq_start_ = backend.alloc(DType::i32, {max_rows});
  seq_slot_ = backend.alloc(DType::i32, {max_rows});
  row_slot_ = backend.alloc(DType::i32, {max_rows});
  host_tables_.resize(size_t(max_rows * max_pages));
  host_slots_.resize(size_t(max_rows));
  host_begin_.reserve(size_t(max_rows + 1));
  host_start_.reserve(size_t(max_rows));
  host_slot_.reserve(size_t(max_rows));
}

void BatchInputs::upload(Backend& backend, const ForwardBatch& batch) {
  rows_ = int64_t(batch.tokens.size());
  logit_count_ = int64_t(batch.logit_rows.size());
  const int64_t n_seqs = int64_t(batch.seq_pages.size());
  std::fill(host_tables_.begin(), host_tables_.begin() + n_seqs * max_pages_, 0);
  for (int64_t s = 0; s < n_seqs; ++s) {
    const auto& pages = batch.seq_pages[size_t(s)]->pages;
    std::copy_n(pages.begin(), std::min<int64_t>(int64_t(pages.size()), max_pages_), host_tables_.begin() + s * max_pages_);
  }
  // Cache slots, and the runs of rows of one sequence.
  host_begin_.clear();
  host_start_.clear();
  host_slot_.clear();
  for (int64_t r = 0; r < rows_; ++r) {
    int32_t pos = batch.positions[size_t(r)];
    int32_t seq = batch.row_seq[size_t(r)];
    const auto& pages = batch.seq_pages[size_t(seq)]->pages;
    host_slots_[size_t(r)] = pages[size_t(pos / page_size_)] * page_size_ + pos % page_size_;
    if (r == 0 || batch.row_seq[size_t(r - 1)] != seq) {
      host_begin_.push_back(int32_t(r));
      host_start_.push_back(pos);
      host_slot_.push_back(batch.seq_slots.empty() ? 0 : batch.seq_slots[size_t(seq)]);
    }
  }
  runs_ = int64_t(host_start_.size());
  host_begin_.push_back(int32_t(rows_));
  backend.upload(ids(), batch.tokens.data());
  backend.upload(positions(), batch.positions.data());
  backend.upload(row_seq_.view().first_dim_slice(0, rows_), batch.row_seq.data());
  backend.upload(cache_slots(), host_slots_.data());
  backend.upload(page_tables_.view().first_dim_slice(0, n_seqs), host_tables_.data());
  if (logit_count_ > 0) backend.upload(logit_row_ids(), batch.logit_rows.data());
  backend.upload(seq_begin_.view().first_dim_slice(0, runs_ + 1), host_begin_.data());
  backend.upload(seq_start_.view().first_dim_slice(0, runs_), host_start_.data());
  backend.upload(seq_slot_.view().first_dim_slice(0, runs_), host_slot_.data());
  row_slots_ = !batch.row_slots.empty();
  if (row_slots_) backend.upload(row_slot_.view().first_dim_slice(0, rows_), batch.row_slots.data());
}

AttentionRows BatchInputs::attention() const {
  return {positions(), row_seq_.view().first_dim_slice(0, rows_), page_tables_.view()};
}

SequenceRows BatchInputs::sequences() const {
  return {seq_begin_.view().first_dim_slice(0, runs_ + 1), seq_start_.view().first_dim_slice(0, runs_),
          seq_slot_.view().first_dim_slice(0, runs_),
          row_slots_ ? row_slot_.view().first_dim_slice(0, rows_) : Tensor{}};
}

}  // namespace lockstep
