#include "lanes/recording_runner.h"

#include <cstring>
#include <string>

namespace lockstep {

namespace {
constexpr uint64_t kFreshState = 0xCBF29CE484222325ull;
}

RecordingRunner::RecordingRunner(int64_t vocab, int64_t max_rows, int64_t max_context, int32_t page_size,
                                 int32_t kv_pages, int32_t state_slots, int32_t end_id)
    : cells_(size_t(kv_pages) * size_t(page_size), -1), states_(size_t(state_slots)) {
  info_.architecture = "RecordingRunner";
  info_.vocab_size = vocab;
  info_.max_rows = max_rows;
  info_.max_context = max_context;
  info_.page_size = page_size;
  info_.kv_pages = kv_pages;
  info_.state_slots = state_slots;
  if (end_id >= 0) info_.eos_ids = {end_id};
}

uint64_t RecordingRunner::fold(uint64_t hash, int32_t token) {
  return (hash ^ uint64_t(uint32_t(token))) * 0x100000001B3ull;
}

int32_t RecordingRunner::id_of(uint64_t read, uint64_t state, int64_t vocab) {
  uint64_t mixed = read * 31 + state;
  mixed ^= mixed >> 29;
  return int32_t(mixed % uint64_t(vocab));
}

int32_t RecordingRunner::next_id(std::span<const int32_t> tokens, int64_t vocab) {
  uint64_t hash = kFreshState;
  for (int32_t token : tokens) hash = fold(hash, token);
  return id_of(hash, hash, vocab);
}

std::vector<int32_t> RecordingRunner::alone_ids(const GenerateRequest& request, int64_t vocab) {
  std::vector<int32_t> tokens = request.prompt, ids;
  for (int64_t i = 0; i < request.max_tokens; ++i) {
    ids.push_back(next_id(tokens, vocab));
    tokens.push_back(ids.back());
  }
  return ids;
}

Status RecordingRunner::run(const StepPlan& plan, StepResult& result) {
  const ForwardBatch& batch = plan.batch;
  const size_t rows = batch.tokens.size(), picks = batch.logit_rows.size();
  if (rows == 0 || int64_t(rows) > info_.max_rows) return make_error("a plan needs 1 to max_rows rows");
  if (batch.positions.size() != rows || batch.row_seq.size() != rows)
    return make_error("tokens, positions and row_seq must have one entry per row");
  if (int64_t(picks) > logit_row_limit(info_)) return make_error("a plan asks for more logit rows than the model's");
  if (plan.samples.size() != picks || plan.top_logprobs.size() != picks)
    return make_error("samples and top_logprobs must have one entry per logit row");
  for (int32_t row : batch.logit_rows)
    if (row < 0 || size_t(row) >= rows) return make_error("a logit row is outside the plan");
  if (!batch.row_slots.empty() && (!batch.recurrent || batch.row_slots.size() != rows || states_.empty()))
    return make_error("row_slots need a recurrent pass, one per row, and state slots");
  calls.push_back({batch.tokens, batch.positions, batch.row_seq, batch.seq_slots, batch.logit_rows,
                   batch.seq_pages.size(), {}, batch.recurrent});
  for (const SampleRow& sample : plan.samples) calls.back().draws.push_back(sample.position);
  last_run_ = batch;
  std::vector<int32_t> picked(rows, -1);
  for (size_t r = 0; r < rows; ++r) {
    const size_t seq = size_t(batch.row_seq[r]);
    const int64_t position = batch.positions[r];
    const PageTable& table = *batch.seq_pages.at(seq);
    int32_t* written = cell(table, position);
    if (!written) return make_error("row " + std::to_string(r) + " is past its page table");
    *written = batch.tokens[r];
    uint64_t state_hash = 0;
    if (!states_.empty()) {
      State& state = states_.at(size_t(batch.seq_slots.at(seq)));
      if (position == 0) state = {kFreshState, 0};
      if (state.position != position)
        return make_error("state slot " + std::to_string(batch.seq_slots[seq]) + " has taken in " +
                          std::to_string(state.position) + " positions; the row is at " + std::to_string(position));
      state = {fold(state.hash, batch.tokens[r]), position + 1};
      state_hash = state.hash;
      if (!batch.row_slots.empty() && batch.row_slots[r] >= 0) states_.at(size_t(batch.row_slots[r])) = state;
    }
    // Only logit rows need what attention reads.
    bool wanted = false;
    for (int32_t row : batch.logit_rows) wanted |= size_t(row) == r;
    if (!wanted) continue;
    uint64_t read = kFreshState;
    for (int64_t p = 0; p <= position; ++p) read = fold(read, *cell(table, p));
    picked[r] = id_of(read, states_.empty() ? read : state_hash, info_.vocab_size);
  }
  result.ids.resize(picks);
  result.logprobs.resize(picks);
  if (!plan.score_ids.empty() && plan.score_ids.size() != picks)
    return make_error("score ids must be none or one per logit row");
  for (size_t i = 0; i < picks; ++i) {
    result.ids[i] = picked[size_t(batch.logit_rows[i])];
    result.logprobs[i] = {result.ids[i], 0.0f, {}};
    // A scoring row: its id's "logprob" is 0 where the fake would have picked it, else -1, and
    // its one alternative is the pick.
    if (!plan.score_ids.empty() && plan.score_ids[i] >= 0) {
      const int32_t pick = result.ids[i];
      result.ids[i] = plan.score_ids[i];
      result.logprobs[i] = {plan.score_ids[i], pick == plan.score_ids[i] ? 0.0f : -1.0f, {{pick, 0.0f}}};
    }
  }
  return Status::success();
}

int32_t* RecordingRunner::cell(const PageTable& table, int64_t position) {
  const int64_t page_size = info_.page_size;
  const size_t index = size_t(position / page_size);
  if (index >= table.pages.size()) return nullptr;
  return &cells_[size_t(table.pages[index]) * size_t(page_size) + size_t(position % page_size)];
}

Status RecordingRunner::draft(const DraftPlan& plan, std::vector<std::vector<int32_t>>& drafts) {
  if (!info_.draft_head) return make_error("this model has no MTP head");
  const ForwardBatch& batch = plan.batch;
  const size_t rows = batch.tokens.size(), picks = batch.logit_rows.size();
  if (rows == 0 || plan.hidden_rows.size() != rows || batch.positions.size() != rows ||
      batch.row_seq.size() != rows || plan.depth.size() != picks)
    return make_error("a draft plan needs rows, one hidden row and position per row, one depth per logit row");
  for (size_t r = 0; r < rows; ++r) {
    const int32_t hidden = plan.hidden_rows[r];
    if (hidden < 0 || size_t(hidden) >= last_run_.tokens.size() ||
        last_run_.positions[size_t(hidden)] != batch.positions[r] ||
        last_run_.seq_pages[size_t(last_run_.row_seq[size_t(hidden)])] != batch.seq_pages.at(size_t(batch.row_seq[r])))
      return make_error("draft row " + std::to_string(r) + " does not pair with its hidden row");
  }
  draft_calls.push_back({batch.tokens, batch.positions, batch.row_seq, batch.seq_slots, batch.logit_rows,
                         batch.seq_pages.size(), {}, false});
  drafts.assign(picks, {});
  for (size_t i = 0; i < picks; ++i) {
    const size_t row = size_t(batch.logit_rows.at(i));
    const PageTable& table = *batch.seq_pages.at(size_t(batch.row_seq[row]));
    const int64_t position = batch.positions[row];
    std::vector<int32_t> tokens;  // the sequence up to the row's position, then its token
    for (int64_t p = 0; p <= position; ++p) {
      const int32_t* at = cell(table, p);
      if (!at) return make_error("draft row " + std::to_string(row) + " is past its page table");
      tokens.push_back(*at);
    }
    tokens.push_back(batch.tokens[row]);
    for (int32_t k = 0; k < plan.depth[i]; ++k) {
      if (k > 0 && !cell(table, position + k)) return make_error("a chained head row is past its page table");
      int32_t next = next_id(tokens, info_.vocab_size);
      if (wrong_at(int64_t(tokens.size()))) next = int32_t((next + 1) % info_.vocab_size);
      drafts[i].push_back(next);
      tokens.push_back(next);
    }
  }
  return Status::success();
}

size_t RecordingRunner::state_bytes() const { return states_.empty() ? 0 : sizeof(State); }

void RecordingRunner::save_state(int32_t slot, std::byte* dst) {
  std::memcpy(dst, &states_.at(size_t(slot)), sizeof(State));
  saves.push_back({slot, states_[size_t(slot)].position});
}

void RecordingRunner::load_state(const std::byte* src, int32_t slot) {
  std::memcpy(&states_.at(size_t(slot)), src, sizeof(State));
  loads.push_back({slot, states_[size_t(slot)].position});
}

void RecordingRunner::copy_state(int32_t from, int32_t to) {
  states_.at(size_t(to)) = states_.at(size_t(from));
  copies.push_back({to, states_[size_t(to)].position});
}

size_t RecordingRunner::page_bytes() const { return size_t(info_.page_size) * sizeof(int32_t); }

void RecordingRunner::save_page(int32_t page, std::byte* dst) {
  std::memcpy(dst, &cells_.at(size_t(page) * size_t(info_.page_size)), page_bytes());
  page_saves.push_back(page);
}

void RecordingRunner::load_page(const std::byte* src, int32_t page) {
  std::memcpy(&cells_.at(size_t(page) * size_t(info_.page_size)), src, page_bytes());
  page_loads.push_back(page);
}

}  // namespace lockstep
