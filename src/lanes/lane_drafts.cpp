// LaneHost, part four (lane_host.h): drafts. A round verifies each drafting stream's drafts in a
// window of rows; the stream keeps the main model's pick at every row up to the first draft
// that differs from it, and rolls back past it; the head then takes in the rows the stream
// kept and drafts its next window.
//
// Why the tokens are those of plain decoding: every row of a window computes what a one-row
// round computes at its position (ForwardBatch::recurrent; attention, matmuls and MoE are
// row-invariant), and each row's pick is the position-keyed draw of plain decoding. A row is
// only ever kept when every token before it is the stream's own, so its pick is the one plain
// decoding makes there. What a rejected row wrote is undone: its Mamba state by taking the
// state after the last kept row (the stream trades its slot for that row's window slot, so
// nothing is copied), its K and V by the next round, which writes those positions again before
// any row reads them.
#include <algorithm>

#include "lanes/lane_host.h"

namespace lockstep {

bool LaneHost::drafts_pay(size_t width) const {
  return settings_.draft_tokens > 0 && width <= size_t(settings_.draft_width);
}

int32_t LaneHost::draft_depth(const Stream& stream) const {
  // A window's last row is at the stream's last position plus its drafts: within the stream's
  // reach, and no row past the token that ends it at max_tokens.
  const int64_t last = int64_t(stream.tokens.size()) - 1;
  const int64_t reach = stream_length_bound(runner_.info(), stream.request) - 1 - last;
  const int64_t left = stream.request.max_tokens - stream.generated - 1;
  return int32_t(std::max<int64_t>(0, std::min({int64_t(settings_.draft_tokens), reach, left})));
}

void LaneHost::settle_window(const Window& window, bool drafting) {
  Stream& stream = *window.stream;
  const int32_t first = window.first_row;  // in a round every row is a logit row, in row order
  int32_t agreed = 0;
  while (agreed < window.drafts && result_.ids[size_t(first + agreed)] == stream.drafts[size_t(agreed)]) ++agreed;
  if (agreed < window.drafts && stream.memory.slot >= 0)
    std::swap(stream.memory.slot, window_slots_[size_t(window.first_slot + agreed)]);
  // Counted as delivered: drafts past an end or a cancel inside the window are not.
  auto count = [&](int32_t delivered) {
    std::lock_guard lock(mutex_);
    stats_.drafted += uint64_t(window.drafts);
    stats_.accepted += uint64_t(delivered);
    for (int32_t j = 0; j < window.drafts; ++j) {
      ++stats_.drafted_at[size_t(j)];
      stats_.accepted_at[size_t(j)] += j < delivered;
    }
  };
  stream.drafts.clear();
  stream.drafted += window.drafts;
  const int64_t position = int64_t(stream.tokens.size()) - 1;  // the window's first row's
  for (int32_t j = 0; j <= agreed; ++j) {
    stream.accepted += j < agreed;
    if (!accept_token(stream, result_.ids[size_t(first + j)], result_.logprobs[size_t(first + j)])) {
      count(std::min(j + 1, agreed));
      return;
    }
  }
  count(agreed);
  if (drafting && stream.drafts_on) absorb(stream, first, position, agreed + 1, true);
}

void LaneHost::absorb(Stream& stream, int32_t first_row, int64_t first_position, int32_t rows, bool drafts) {
  const int32_t depth = drafts ? draft_depth(stream) : 0;
  if (drafts && depth == 0) return;  // the stream is about to end: nothing left to draft for
  ForwardBatch& batch = draft_plan_.batch;
  const int32_t seq = int32_t(batch.seq_pages.size());
  batch.seq_pages.push_back(&stream.memory.table);
  if (stream.memory.slot >= 0) batch.seq_slots.push_back(stream.memory.slot);
  for (int32_t r = 0; r < rows; ++r) {
    batch.tokens.push_back(stream.tokens[size_t(first_position + r + 1)]);
    batch.positions.push_back(int32_t(first_position + r));
    batch.row_seq.push_back(seq);
    draft_plan_.hidden_rows.push_back(first_row + r);
  }
  if (!drafts) return;
  // Chained drafts run head rows up to the position before the last draft's.
  memory_.grow(stream.memory, int64_t(stream.tokens.size()) - 1 + depth);
  batch.logit_rows.push_back(int32_t(batch.tokens.size()) - 1);
  draft_plan_.depth.push_back(depth);
  draft_streams_.push_back(&stream);
}

void LaneHost::run_drafts() {
  if (draft_plan_.batch.tokens.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  Status drafted = runner_.draft(draft_plan_, drafted_);
  count_seconds(&LaneStats::head_seconds, start);
  if (!drafted.ok()) {
    // Drafts only ever propose: without them the streams decode a row a round, as they would.
    std::lock_guard lock(mutex_);
    ++stats_.draft_failures;
    return;
  }
  for (size_t i = 0; i < draft_streams_.size(); ++i) draft_streams_[i]->drafts = std::move(drafted_[i]);
}

}  // namespace lockstep
