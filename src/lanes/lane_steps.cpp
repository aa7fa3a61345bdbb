// LaneHost, part two (lane_host.h): its two kinds of work, a fill step and a round, and how a
// stream ends. Part one, lane_host.cpp: submission, the loop, admission.
#include <algorithm>

#include "lanes/lane_host.h"

namespace lockstep {

void LaneHost::fill_step(Stream& stream) {
  take_longer_prefix(stream);
  const FillChunk chunk = stream.plan[stream.next_chunk];
  const bool last = stream.next_chunk + 1 == stream.plan.size();
  memory_.grow(stream.memory, chunk.end);
  plan_.clear();
  round_streams_.clear();
  ForwardBatch& batch = plan_.batch;
  batch.seq_pages.push_back(&stream.memory.table);
  if (stream.memory.slot >= 0) batch.seq_slots.push_back(stream.memory.slot);
  for (int64_t p = chunk.begin; p < chunk.end; ++p) {
    batch.tokens.push_back(stream.tokens[size_t(p)]);
    batch.positions.push_back(int32_t(p));
    batch.row_seq.push_back(0);
  }
  if (last) plan_token(stream, int32_t(chunk.end - chunk.begin - 1));
  {
    std::lock_guard lock(mutex_);
    ++stats_.fill_steps;
    stats_.prompt_tokens += uint64_t(chunk.end - chunk.begin);
  }
  ++stream.next_chunk;
  if (last) stream.phase = Phase::decoding;
  run_plan([&] { cache_fill(stream, chunk.end); });
}

void LaneHost::round() {
  plan_.clear();
  round_streams_.clear();
  ForwardBatch& batch = plan_.batch;
  for (auto& stream : active_) {
    if (!stream || stream->phase != Phase::decoding) continue;
    const int64_t position = int64_t(stream->tokens.size()) - 1;
    memory_.grow(stream->memory, position + 1);
    const int32_t seq = int32_t(batch.seq_pages.size());
    batch.seq_pages.push_back(&stream->memory.table);
    if (stream->memory.slot >= 0) batch.seq_slots.push_back(stream->memory.slot);
    batch.tokens.push_back(stream->tokens.back());
    batch.positions.push_back(int32_t(position));
    batch.row_seq.push_back(seq);
    plan_token(*stream, seq);
  }
  {
    std::lock_guard lock(mutex_);
    ++stats_.rounds;
    stats_.round_rows += round_streams_.size();
  }
  run_plan({});
}

void LaneHost::plan_token(Stream& stream, int32_t logit_row) {
  plan_.batch.logit_rows.push_back(logit_row);
  plan_.samples.push_back({stream.request.sampling, int64_t(stream.tokens.size())});
  plan_.top_logprobs.push_back(stream.request.top_logprobs);
  round_streams_.push_back(&stream);
}

void LaneHost::run_plan(const std::function<void()>& after_run) {
  if (Status ran = runner_.run(plan_, result_); !ran.ok()) {
    fail_all(ran.message());
    return;
  }
  if (after_run) after_run();
  for (size_t i = 0; i < round_streams_.size(); ++i) accept_token(*round_streams_[i], result_.ids[i], result_.logprobs[i]);
}

void LaneHost::accept_token(Stream& stream, int32_t id, const TokenLogprobs& logprobs) {
  const int64_t position = int64_t(stream.tokens.size());
  stream.tokens.push_back(id);
  ++stream.generated;
  {
    std::lock_guard lock(mutex_);
    ++stats_.generated_tokens;
  }
  if (stream.request.top_logprobs >= 0 && stream.events.on_logprobs) stream.events.on_logprobs(logprobs);
  if (stream.events.on_token) stream.events.on_token(id);
  const std::optional<FinishReason> reason =
      finish_after(runner_.info(), stream.request, id, stream.generated, position);
  if (!reason) return;
  end(stream, {StreamEnd::Kind::finished, *reason, {}});
  for (auto& active : active_)
    if (active.get() == &stream) active.reset();
}

void LaneHost::end(Stream& stream, StreamEnd how) {
  how.cached_tokens = stream.cached;
  if (stream.admitted) {
    cache_ending(stream, how);
    memory_.release(stream.memory);
  }
  {
    std::lock_guard lock(mutex_);
    if (stream.admitted) --stats_.active;
    else --stats_.queued;
    note_memory();
    if (how.kind == StreamEnd::Kind::finished) ++stats_.finished;
    if (how.kind == StreamEnd::Kind::cancelled) ++stats_.cancelled;
    if (how.kind == StreamEnd::Kind::failed) ++stats_.failed;
  }
  if (stream.events.on_end) stream.events.on_end(how);
}

void LaneHost::fail_all(const std::string& error) {
  for (auto& stream : active_)
    if (stream) end(*stream, {StreamEnd::Kind::failed, {}, error}), stream.reset();
}

}  // namespace lockstep
