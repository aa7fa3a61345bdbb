// The Model interface: what the runner and the CLI know of a model (the lanes see only
// model_info.h, through a StepRunner). A family implements it against the Backend op
// interface; nothing outside src/models/ knows a family's layers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "models/model_info.h"

namespace lockstep {

struct ModelOptions {
  int64_t max_rows = 256;    // rows one forward pass takes (a fill chunk, or a round)
  // Rows of logits one pass may ask for (0: max_rows): the logits buffer is [this, vocab] f32,
  // 2 GiB at 4,096 rows of a 131,072-entry vocabulary, where a pass of many short prompts' chunks
  // asks for one row a prompt.
  int64_t max_logit_rows = 0;
  int64_t max_context = 0;   // 0: the config's max_position_embeddings
  int32_t page_size = 16;    // positions per KV page, a power of two dividing kAttentionSplit
  int32_t kv_pages = 0;      // 0: enough for kv_sequences sequences of max_context
  int32_t kv_sequences = 1;
  int32_t state_slots = 1;   // recurrent-state slots, for models that keep such state
  // More state slots, made only by a model with state and an MTP head: a verify window's
  // per-row states (LaneSettings::draft_width * draft_tokens).
  int32_t draft_state_slots = 0;
  // Loading a checkpoint: called as the model takes each weight, with the bytes of the weights
  // taken so far and of all of them (the CLI shows a progress line on stderr).
  std::function<void(int64_t done, int64_t total)> on_progress = nullptr;
  // Loading a safetensors checkpoint: called once with a line naming the tensors the model did
  // not read, if any (the CLI prints it as a warning: such a checkpoint is not the model its
  // config describes, or holds parts lockstep does not use).
  std::function<void(const std::string& message)> on_warning = nullptr;
  // Matmul weights quantized to this layout as they load (`--quantize`; nullopt: as stored).
  std::optional<QuantLayout> quantize;
  // Size the KV pool and the state slots to the memory left after the weights and activations
  // (fit_caches) instead of failing when what is asked does not fit; ModelInfo says what was
  // made. Without it, the load fails naming what did not fit.
  bool fit_memory = false;
  // Tensor parallel over this many ranks (issue 28): each rank holds its share of the attention
  // heads, the Mamba2 head groups, the MLP width and each expert's width, and the row-parallel
  // projections' partial sums are added in rank order, ((p0 + p1) + p2) + ..., whatever the
  // pass's rows, so replies stay exact. In one process the ranks run one after another on the
  // one backend (simulated ranks: the arithmetic that ranks on their own GPUs will reproduce).
  int32_t tensor_parallel = 1;
};

// The logit rows a model made with `options` takes: max_logit_rows, at most max_rows.
inline int64_t logit_rows_of(const ModelOptions& options) {
  return options.max_logit_rows > 0 && options.max_logit_rows < options.max_rows ? options.max_logit_rows
                                                                                  : options.max_rows;
}

// The rank-order sum of tensor-parallel ranks' partial outputs: rank r writes its part into
// target(r) (the sum itself for the first rank, `part` for the others), then add(r) adds it:
// ((p0 + p1) + p2) + ..., the order the all-reduce keeps, whatever the pass's rows.
struct RankSum {
  Tensor sum, part;  // [n, hidden]; part unused with one rank
  const Tensor& target(size_t rank) const { return rank == 0 ? sum : part; }
  void add(Backend& backend, size_t rank) const {
    if (rank > 0) backend.add(sum, part, sum);
  }
};

// How tensor-parallel ranks share a model's KV heads: each rank takes the KV heads its query
// heads read, kv_heads / ranks of them, or, with more ranks than KV heads, one KV head repeated
// on ranks / kv_heads ranks (each computes and caches it alike).
struct KvHeadSplit {
  int64_t kv_heads = 1, ranks = 1;
  bool divides() const { return kv_heads % ranks == 0 || ranks % kv_heads == 0; }
  int64_t per_rank() const { return kv_heads >= ranks ? kv_heads / ranks : 1; }
  int64_t first(int64_t rank) const { return rank * kv_heads / ranks; }
  int64_t cached() const { return per_rank() * ranks; }  // KV heads cached over all the ranks
};

// What fits: the KV pool in pages and the state slots.
struct CacheFit {
  int64_t kv_pages = 0;
  int32_t state_slots = 0;
};
// The KV pool and state slots `free_bytes` holds, keeping a margin for what passes allocate as
// they run (max(1 GiB, 5%)): as asked (kv_pages, state_slots) when that fits; else the slots cut
// by the share of the asked bytes that fits (at least min_slots, and leaving room for min_pages,
// one sequence of the full context), then pages with what is left, at least min_pages. nullopt
// when even the minimum does not fit.
std::optional<CacheFit> fit_caches(double free_bytes, int64_t kv_pages, int64_t min_pages, double page_bytes,
                                   int32_t state_slots, int32_t min_slots, double slot_bytes);

class Model {
 public:
  virtual ~Model() = default;
  const ModelInfo& info() const { return info_; }
  void set_eos_ids(std::vector<int32_t> ids) { info_.eos_ids = std::move(ids); }

  virtual Backend& backend() = 0;
  // Runs one pass: writes each row's K and V into the cache and returns the logits of
  // batch.logit_rows, f32 [logit_rows.size(), vocab] in backend memory, valid until the next
  // call. Errors (too many rows, ids out of range, a page table too short) change nothing.
  [[nodiscard]] virtual Expected<Tensor> forward(const ForwardBatch& batch) = 0;

  // Bytes of one state slot's recurrent state, every layer's (0: the model keeps none).
  virtual size_t state_bytes() const { return 0; }
  // Copies state slot `slot` to host memory `dst` (state_bytes() bytes), as the passes before
  // left it.
  virtual void save_state(int32_t slot, std::byte* dst) {
    (void)slot;
    (void)dst;
  }
  // Sets state slot `slot` from `src` (what save_state wrote), for the passes after.
  virtual void load_state(const std::byte* src, int32_t slot) {
    (void)src;
    (void)slot;
  }
  // Sets state slot `to` from slot `from`, on the device, in order with the passes.
  virtual void copy_state(int32_t from, int32_t to) {
    (void)from;
    (void)to;
  }

  // The MTP head, for models that have one (ModelInfo::draft_head): a pass over rows that each
  // pair a hidden state with the token after it. Row r reads hidden row hidden_rows[r] of the
  // last main pass (forward) or of the last head pass (a draft chained on a draft), and the
  // head's own K and V through the batch's page tables, at the hidden state's position (the
  // head writes its K and V there). Returns the logits of batch.logit_rows, as forward does.
  // With `device_tokens` (i32, one per row, in backend memory: the picks of a pass before, so
  // that chained drafts never wait for the host), the rows' tokens are read from there and
  // batch.tokens' values are not.
  enum class DraftInput { main_pass, head_pass };
  [[nodiscard]] virtual Expected<Tensor> forward_draft(const ForwardBatch& batch, DraftInput input,
                                                       std::span<const int32_t> hidden_rows,
                                                       const Tensor* device_tokens = nullptr) {
    (void)batch;
    (void)input;
    (void)hidden_rows;
    (void)device_tokens;
    return make_error("this model has no MTP head");
  }

  // The same for KV page `page`: every attention layer's K and V at its positions.
  size_t page_bytes();
  void save_page(int32_t page, std::byte* dst);
  void load_page(const std::byte* src, int32_t page);

 protected:
  ModelInfo info_;
  // Every attention layer's K and V caches, [kv_pages, ...] each (none: no attention).
  virtual std::vector<Tensor> kv_caches() = 0;
  // Checks a batch against info_ before anything is uploaded.
  [[nodiscard]] Status check_batch(const ForwardBatch& batch);
  [[nodiscard]] Status check_row_slots(const ForwardBatch& batch);
  // Refuses a context past the config's max_position_embeddings (the model was not trained
  // there), before any weight is loaded.
  [[nodiscard]] static Status check_context(const ModelOptions& options, int64_t config_max_positions);
  // Refuses, before anything is allocated, a KV pool and state slots that the backend's free
  // memory cannot hold: `kv_bytes_per_position` over every layer, `state_bytes_per_slot` over
  // every layer. The error says how much was needed and how much there is.
  [[nodiscard]] static Status check_cache_fits(Backend& backend, const ModelOptions& options,
                                               int64_t config_max_positions, double kv_bytes_per_position,
                                               double state_bytes_per_slot);
  // Sets info_'s rows, context and KV pool from the options (the context defaults to the
  // config's max_positions); returns the page-table width, context / page_size.
  int64_t plan_memory(const ModelOptions& options, int64_t config_max_positions);
  // With options.fit_memory, after the weights and activations: the options with the KV pool
  // and state slots cut to what the backend's free memory holds (fit_caches; the KV pool is
  // then set in info_ again), or an error saying what does not fit. Without it, the options.
  [[nodiscard]] Expected<ModelOptions> fit_to_memory(const ModelOptions& options, int64_t config_max_positions,
                                                     double kv_bytes_per_position, double state_bytes_per_slot);

 private:
  std::vector<bool> seen_sequences_;  // check_batch's scratch, kept to avoid allocating per pass
};

}  // namespace lockstep
