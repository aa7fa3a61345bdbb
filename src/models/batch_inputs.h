// The per-pass inputs every family uploads from a ForwardBatch: token ids, positions, the
// attention view (row to sequence, page tables, cache slots), the sequence runs for ops with
// recurrent state, and the rows whose logits are wanted. Sized once for max_rows.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "models/model.h"

namespace lockstep {

class BatchInputs {
 public:
  BatchInputs() = default;
  BatchInputs(Backend& backend, int64_t max_rows, int64_t max_pages, int32_t page_size);

  // Uploads a batch that passed Model::check_batch.
  void upload(Backend& backend, const ForwardBatch& batch);

  int64_t rows() const { return rows_; }
  int64_t logit_rows() const { return logit_count_; }
  Tensor ids() const { return ids_.view().first_dim_slice(0, rows_); }              // i32 [n]
  Tensor positions() const { return positions_.view().first_dim_slice(0, rows_); }  // i32 [n]
  Tensor cache_slots() const { return slots_.view().first_dim_slice(0, rows_); }     // i32 [n]
  Tensor logit_row_ids() const { return logit_rows_.view().first_dim_slice(0, logit_count_); }
  AttentionRows attention() const;
  SequenceRows sequences() const;

 private:
  int64_t max_pages_ = 0;
  int32_t page_size_ = 0;
  int64_t rows_ = 0, logit_count_ = 0, runs_ = 0;
  OwnedTensor ids_, positions_, row_seq_, page_tables_, slots_, logit_rows_;
  OwnedTensor seq_begin_, seq_start_, seq_slot_, row_slot_;
  bool row_slots_ = false;  // the batch gave row_slots
  std::vector<int32_t> host_tables_, host_slots_, host_begin_, host_start_, host_slot_;
};

}  // namespace lockstep
