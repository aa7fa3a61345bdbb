// What a model says of itself (ModelInfo) and what one forward pass asks of it (ForwardBatch):
// plain data, so the lanes can plan passes without knowing the Model or its backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memory/kv_pages.h"

namespace lockstep {

struct ModelInfo {
  std::string architecture;      // as config.json names it, e.g. "LlamaForCausalLM"
  int64_t vocab_size = 0;
  int64_t max_context = 0;       // positions a sequence may use (the KV page tables' reach)
  int64_t max_rows = 0;          // rows one forward pass takes
  int64_t max_logit_rows = 0;    // rows of logits one pass may ask for (at most max_rows)
  int32_t page_size = 0;         // positions per KV page
  int32_t kv_pages = 0;          // pages in the model's cache; a KvPagePool hands them out
  int64_t kv_page_bytes = 0;     // backend memory of one page, over every layer
  int32_t state_slots = 0;       // recurrent-state slots (0: the model keeps no such state)
  int64_t decode_weight_bytes = 0;  // weight bytes one decode row reads (MoE: the active experts)
  bool draft_head = false;       // has an MTP head (Model::forward_draft)
  std::vector<int32_t> eos_ids;  // a generated id in this list ends the stream
};

// The logit rows one pass of `info`'s model may ask for (a model that does not say: max_rows).
inline int64_t logit_row_limit(const ModelInfo& info) {
  return info.max_logit_rows > 0 ? info.max_logit_rows : info.max_rows;
}

// One forward pass over rows of one or more sequences (host memory; the model uploads it).
// Row r is token tokens[r] at position positions[r] of sequence row_seq[r]; that sequence's
// page table must already hold every position up to the row's own. A sequence's rows are
// contiguous and at consecutive positions. Models with recurrent state keep sequence s in
// state slot seq_slots[s]; a sequence whose first row is at position 0 starts fresh.
struct ForwardBatch {
  std::vector<int32_t> tokens;              // [n_rows]
  std::vector<int32_t> positions;           // [n_rows]
  std::vector<int32_t> row_seq;             // [n_rows], index into seq_pages
  std::vector<const PageTable*> seq_pages;  // [n_seqs]
  std::vector<int32_t> seq_slots;           // [n_seqs], for models with state_slots > 0
  std::vector<int32_t> logit_rows;          // rows whose logits are wanted, in output order
  // Every row as one-row decoding computes it, however many rows a sequence has (a verify
  // window of drafts): Mamba layers run the recurrence row by row, not the chunked scan that a
  // fill's rows take. Attention, matmuls and MoE are the same either way.
  bool recurrent = false;
  // With `recurrent`, models with state slots: [n_rows] or empty. The state after row r (every
  // Mamba layer's) also lands in state slot row_slots[r] (-1: nowhere), so a verify window can
  // roll its sequence back to any row. The slots must be free: no sequence of the pass uses one.
  std::vector<int32_t> row_slots;

  void clear() {
    tokens.clear();
    positions.clear();
    row_seq.clear();
    seq_pages.clear();
    seq_slots.clear();
    logit_rows.clear();
    recurrent = false;
    row_slots.clear();
  }
};

}  // namespace lockstep
