// The per-pass inputs every family uploads from a ForwardBatch: token ids, positions, the
// attention view (row to sequence, page tables, cache slots), the sequence runs for ops with
// recurrent state, and the rows whose logits are wanted. All of them lie end to end in one i32
// buffer, sized once for max_rows, and go up in one copy: on the GPU each copy is a call and a
// gap on the stream, and a pass of a few rows is bound by those, not by its bytes.
#pragma once

#include <span>
#include <vector>

#include "backend/backend.h"
#include "models/model.h"

namespace lockstep {

class BatchInputs {
 public:
  BatchInputs() = default;
  // Sized for max_rows rows of their own sequences, or with `grow` for each upload's batch,
  // the buffer growing (after the backend's queued ops have run) when one needs more.
  BatchInputs(Backend& backend, int64_t max_rows, int64_t max_pages, int32_t page_size, bool grow = false);

  // Uploads a batch that passed Model::check_batch, and with it `row_values` (none, or one
  // value a row that a family's pass reads besides the batch: the MTP head's hidden rows).
  // Without `ordered` the copy may land before ops queued earlier (Backend::upload_unordered):
  // only where none of them reads this buffer.
  void upload(Backend& backend, const ForwardBatch& batch, std::span<const int32_t> row_values = {},
              bool ordered = true);

  int64_t rows() const { return rows_; }
  int64_t logit_rows() const { return logit_.count; }
  Tensor ids() const { return part(ids_); }                // i32 [n]
  Tensor positions() const { return part(positions_); }    // i32 [n]
  Tensor cache_slots() const { return part(slots_); }      // i32 [n]
  Tensor logit_row_ids() const { return part(logit_); }    // i32 [logit rows]
  Tensor row_values() const { return part(row_values_); }  // i32 [n]: upload's row_values
  // Whether the logit rows are the rows 0, 1, ..., n - 1 (n > 0): then a pass needs no gather.
  bool logits_of_every_row() const { return every_row_; }
  AttentionRows attention() const;
  SequenceRows sequences() const;

 private:
  // Where a field lies in the buffer this pass: `count` values from `at`.
  struct Part {
    int64_t at = 0, count = 0;
  };
  Tensor part(Part p) const { return buffer_.view().first_dim_slice(p.at, p.count); }
  int32_t* host(Part p) { return host_.data() + p.at; }

  int64_t max_pages_ = 0;
  int32_t page_size_ = 0;
  bool grow_ = false;
  int64_t rows_ = 0, n_seqs_ = 0;
  OwnedTensor buffer_;         // i32: the fields below, end to end
  std::vector<int32_t> host_;  // the same on the host, written, then uploaded in one copy
  Part ids_, positions_, row_seq_, slots_, row_slot_, row_values_, logit_, seq_begin_, seq_start_, seq_slot_, page_tables_;
  bool row_slots_ = false;  // the batch gave row_slots
  bool every_row_ = false;
};

}  // namespace lockstep
