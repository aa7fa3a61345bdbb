#include "models/model.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

namespace lockstep {

namespace {

// The KV pool the options ask for: the context (the config's when 0), pages a sequence of it
// takes, and pages in all (kv_pages, or kv_sequences such sequences).
struct AskedPool {
  int64_t context, max_pages, pages;
};
AskedPool asked_pool(const ModelOptions& options, int64_t config_max_positions) {
  const int64_t context = options.max_context > 0 ? options.max_context : config_max_positions;
  const int64_t max_pages = (context + options.page_size - 1) / options.page_size;
  const int64_t pages = options.kv_pages > 0 ? options.kv_pages : int64_t(std::max(options.kv_sequences, 1)) * max_pages;
  return {context, max_pages, pages};
}

}  // namespace

Status Model::check_context(const ModelOptions& options, int64_t config_max_positions) {
  if (options.max_context <= config_max_positions) return Status::success();
  return make_error("--context " + std::to_string(options.max_context) + " is past this model's maximum of " +
                    std::to_string(config_max_positions) + " positions (max_position_embeddings)");
}

Status Model::check_cache_fits(Backend& backend, const ModelOptions& options, int64_t config_max_positions,
                               double kv_bytes_per_position, double state_bytes_per_slot) {
  const auto [context, max_pages, pages] = asked_pool(options, config_max_positions);
  const double kv = double(pages) * double(options.page_size) * kv_bytes_per_position;
  const double state = double(std::max(options.state_slots, 0)) * state_bytes_per_slot;
  const double free = backend.free_memory();
  if (kv + state <= free) return Status::success();
  return make_error("the KV cache (" + format_bytes(kv) + " for " + std::to_string(std::max(options.kv_sequences, 1)) +
                    " sequences of " + std::to_string(context) + " positions) and state slots (" + format_bytes(state) +
                    ") need " + format_bytes(kv + state) + ", and the " + std::string(backend.name()) + " backend has " +
                    format_bytes(std::max(free, 0.0)) + " free. Lower --parallel or --context");
}

std::optional<CacheFit> fit_caches(double free_bytes, int64_t kv_pages, int64_t min_pages, double page_bytes,
                                   int32_t state_slots, int32_t min_slots, double slot_bytes) {
  const double room = free_bytes - std::max(double(1 << 30), 0.05 * free_bytes);
  const double asked = double(kv_pages) * page_bytes + double(state_slots) * slot_bytes;
  if (asked <= room) return CacheFit{kv_pages, state_slots};
  // Both shrink by the share of what was asked that fits, slots keeping room for min_pages.
  const double share = std::max(room, 0.0) / asked;
  int32_t slots = std::max(min_slots, int32_t(std::floor(double(state_slots) * share)));
  if (slot_bytes > 0)
    slots = std::min(slots, int32_t(std::floor(std::max(room - double(min_pages) * page_bytes, 0.0) / slot_bytes)));
  if (slots < min_slots) return std::nullopt;
  const int64_t pages =
      std::min<int64_t>(kv_pages, int64_t(std::floor((room - double(slots) * slot_bytes) / page_bytes)));
  if (pages < min_pages) return std::nullopt;
  return CacheFit{pages, slots};
}

Expected<ModelOptions> Model::fit_to_memory(const ModelOptions& options, int64_t config_max_positions,
                                            double kv_bytes_per_position, double state_bytes_per_slot) {
  if (!options.fit_memory) return options;
  const auto [context, max_pages, pages] = asked_pool(options, config_max_positions);
  const double page_bytes = double(options.page_size) * kv_bytes_per_position;
  const int32_t slots = state_bytes_per_slot > 0 ? std::max(options.state_slots, 1) : options.state_slots;
  const double free = backend().free_memory();
  const std::optional<CacheFit> fit =
      fit_caches(free, pages, max_pages, page_bytes, slots, state_bytes_per_slot > 0 ? 1 : 0, state_bytes_per_slot);
  if (!fit)
    return make_error("beside the weights, the " + std::string(backend().name()) + " backend has " +
                      format_bytes(std::max(free, 0.0)) + " free: not enough for the KV pages of one sequence of " +
                      std::to_string(context) + " positions (" + format_bytes(double(max_pages) * page_bytes) + ")" +
                      (state_bytes_per_slot > 0 ? " and one state slot (" + format_bytes(state_bytes_per_slot) + ")" : "") +
                      ". Lower --context");
  ModelOptions fitted = options;
  fitted.kv_pages = int32_t(std::min<int64_t>(fit->kv_pages, INT32_MAX));
  fitted.state_slots = fit->state_slots;
  plan_memory(fitted, config_max_positions);
  return fitted;
}

int64_t Model::plan_memory(const ModelOptions& options, int64_t config_max_positions) {
  const auto [context, max_pages, pages] = asked_pool(options, config_max_positions);
  info_.page_size = options.page_size;
  info_.max_context = context;  // what was asked (or the model's maximum), not rounded up to pages
  info_.max_rows = options.max_rows;
  info_.max_logit_rows = logit_rows_of(options);
  // Past INT32_MAX pages the pool could never be allocated: the cache's alloc refuses it.
  info_.kv_pages = int32_t(std::min<int64_t>(pages, INT32_MAX));
  return max_pages;
}

// A verify window's row_slots: one per row, each -1 or a state slot no sequence of the pass
// uses and no other row names.
Status Model::check_row_slots(const ForwardBatch& batch) {
  if (info_.state_slots <= 0) return make_error("row_slots need a model with state slots");
  if (!batch.recurrent) return make_error("row_slots need a recurrent pass");
  if (batch.row_slots.size() != batch.tokens.size()) return make_error("row_slots must have one entry per row");
  std::vector<bool>& taken = seen_sequences_;
  taken.assign(size_t(info_.state_slots), false);
  for (int32_t slot : batch.seq_slots) taken[size_t(slot)] = true;
  for (int32_t slot : batch.row_slots) {
    if (slot == -1) continue;
    if (slot < 0 || slot >= info_.state_slots) return make_error("a row slot is outside the pool");
    if (taken[size_t(slot)]) return make_error("a row slot is a sequence's slot or another row's");
    taken[size_t(slot)] = true;
  }
  return Status::success();
}

Status Model::check_batch(const ForwardBatch& batch) {
  const size_t n = batch.tokens.size();
  if (n == 0) return make_error("a forward pass needs at least one row");
  if (int64_t(n) > info_.max_rows)
    return make_error("a forward pass of " + std::to_string(n) + " rows exceeds the model's " +
                      std::to_string(info_.max_rows));
  if (batch.positions.size() != n || batch.row_seq.size() != n)
    return make_error("tokens, positions and row_seq must have one entry per row");
  if (int64_t(batch.logit_rows.size()) > info_.max_logit_rows)
    return make_error("a forward pass asks for " + std::to_string(batch.logit_rows.size()) +
                      " logit rows, past the model's " + std::to_string(info_.max_logit_rows));
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
  // Each sequence's rows: one contiguous run at consecutive positions.
  std::vector<bool>& seen = seen_sequences_;
  seen.assign(batch.seq_pages.size(), false);
  for (size_t r = 0; r < n; ++r) {
    int32_t seq = batch.row_seq[r];
    bool continues = r > 0 && batch.row_seq[r - 1] == seq;
    if (continues && batch.positions[r] != batch.positions[r - 1] + 1)
      return make_error("a sequence's rows must be at consecutive positions");
    if (!continues) {
      if (seen[size_t(seq)]) return make_error("a sequence's rows must be contiguous in the batch");
      seen[size_t(seq)] = true;
      for (int32_t page : batch.seq_pages[size_t(seq)]->pages)
        if (page < 0 || page >= info_.kv_pages) return make_error("a page table names a page outside the cache");
    }
  }
  if (info_.state_slots > 0) {
    if (batch.seq_slots.size() != batch.seq_pages.size()) return make_error("every sequence needs a state slot");
    for (int32_t slot : batch.seq_slots)
      if (slot < 0 || slot >= info_.state_slots) return make_error("a state slot is outside the pool");
  }
  if (!batch.row_slots.empty()) LOCKSTEP_TRY(check_row_slots(batch));
  if (int64_t(batch.seq_pages.size()) > info_.max_rows) return make_error("more sequences than rows");
  for (int32_t row : batch.logit_rows)
    if (row < 0 || size_t(row) >= n) return make_error("a logit row is outside the batch");
  return Status::success();
}

size_t Model::page_bytes() {
  size_t bytes = 0;
  for (const Tensor& cache : kv_caches()) bytes += cache.first_dim_slice(0, 1).bytes();
  return bytes;
}

void Model::save_page(int32_t page, std::byte* dst) {
  for (const Tensor& cache : kv_caches()) {
    const Tensor part = cache.first_dim_slice(page, 1);
    backend().download(dst, part);
    dst += part.bytes();
  }
}

void Model::load_page(const std::byte* src, int32_t page) {
  for (const Tensor& cache : kv_caches()) {
    const Tensor part = cache.first_dim_slice(page, 1);
    backend().upload(part, src);
    src += part.bytes();
  }
}

}  // namespace lockstep
