#include "models/batch_inputs.h"

#include <algorithm>

namespace lockstep {

namespace {

// Seven fields of a value a row, three of a value a run (a run per row at most, and
// seq_begin's end), and a page table a sequence.
int64_t capacity_for(int64_t rows, int64_t seqs, int64_t max_pages) { return 10 * rows + 1 + seqs * max_pages; }

}  // namespace

BatchInputs::BatchInputs(Backend& backend, int64_t max_rows, int64_t max_pages, int32_t page_size, bool grow)
    : max_pages_(max_pages), page_size_(page_size), grow_(grow) {
  if (grow) return;
  const int64_t capacity = capacity_for(max_rows, max_rows, max_pages);
  buffer_ = backend.alloc(DType::i32, {capacity});
  host_.resize(size_t(capacity));
}

void BatchInputs::upload(Backend& backend, const ForwardBatch& batch, std::span<const int32_t> row_values,
                         bool ordered) {
  rows_ = int64_t(batch.tokens.size());
  n_seqs_ = int64_t(batch.seq_pages.size());
  if (const int64_t needed = capacity_for(rows_, n_seqs_, max_pages_); grow_ && int64_t(host_.size()) < needed) {
    backend.synchronize();  // queued ops may still read the buffer it replaces
    const int64_t capacity = std::max(needed, 2 * int64_t(host_.size()));
    buffer_ = backend.alloc(DType::i32, {capacity});
    host_.resize(size_t(capacity));
  }
  row_slots_ = !batch.row_slots.empty();
  every_row_ = rows_ > 0 && int64_t(batch.logit_rows.size()) == rows_;
  for (int64_t r = 0; every_row_ && r < rows_; ++r) every_row_ = batch.logit_rows[size_t(r)] == r;
  // The runs of rows of one sequence, counted first: the fields after them lie by their count.
  int64_t runs = 0;
  for (int64_t r = 0; r < rows_; ++r) runs += r == 0 || batch.row_seq[size_t(r - 1)] != batch.row_seq[size_t(r)];
  int64_t at = 0;
  auto lay = [&at](int64_t count) {
    Part p{at, count};
    at += count;
    return p;
  };
  ids_ = lay(rows_);
  positions_ = lay(rows_);
  row_seq_ = lay(rows_);
  slots_ = lay(rows_);
  row_slot_ = lay(row_slots_ ? rows_ : 0);
  row_values_ = lay(int64_t(row_values.size()));
  logit_ = lay(int64_t(batch.logit_rows.size()));
  seq_begin_ = lay(runs + 1);
  seq_start_ = lay(runs);
  seq_slot_ = lay(runs);
  page_tables_ = lay(n_seqs_ * max_pages_);

  std::copy_n(batch.tokens.data(), rows_, host(ids_));
  std::copy_n(batch.positions.data(), rows_, host(positions_));
  std::copy_n(batch.row_seq.data(), rows_, host(row_seq_));
  if (row_slots_) std::copy_n(batch.row_slots.data(), rows_, host(row_slot_));
  std::copy(row_values.begin(), row_values.end(), host(row_values_));
  std::copy_n(batch.logit_rows.data(), logit_.count, host(logit_));
  int32_t* tables = host(page_tables_);
  std::fill_n(tables, page_tables_.count, 0);
  for (int64_t s = 0; s < n_seqs_; ++s) {
    const auto& pages = batch.seq_pages[size_t(s)]->pages;
    std::copy_n(pages.begin(), std::min<int64_t>(int64_t(pages.size()), max_pages_), tables + s * max_pages_);
  }
  // Cache slots, and the runs.
  int32_t *slots = host(slots_), *begin = host(seq_begin_), *start = host(seq_start_), *slot = host(seq_slot_);
  for (int64_t r = 0, run = 0; r < rows_; ++r) {
    const int32_t pos = batch.positions[size_t(r)];
    const int32_t seq = batch.row_seq[size_t(r)];
    const auto& pages = batch.seq_pages[size_t(seq)]->pages;
    slots[r] = pages[size_t(pos / page_size_)] * page_size_ + pos % page_size_;
    if (r == 0 || batch.row_seq[size_t(r - 1)] != seq) {
      begin[run] = int32_t(r);
      start[run] = pos;
      slot[run] = batch.seq_slots.empty() ? 0 : batch.seq_slots[size_t(seq)];
      ++run;
    }
  }
  begin[runs] = int32_t(rows_);
  const Tensor used = buffer_.view().first_dim_slice(0, at);
  if (ordered)
    backend.upload(used, host_.data());
  else
    backend.upload_unordered(used, host_.data());
}

AttentionRows BatchInputs::attention() const {
  return {positions(), part(row_seq_), part(page_tables_).reshaped(Shape{n_seqs_, max_pages_})};
}

SequenceRows BatchInputs::sequences() const {
  return {part(seq_begin_), part(seq_start_), part(seq_slot_), row_slots_ ? part(row_slot_) : Tensor{}};
}

}  // namespace lockstep
