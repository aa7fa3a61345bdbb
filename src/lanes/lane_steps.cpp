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
  // max_tokens 0: the prompt is filled (for its logprobs) and nothing drawn.
  const bool draws = last && stream.request.max_tokens > 0;
  if (draws) plan_token(stream, int32_t(chunk.end - chunk.begin - 1), 0);
  const size_t scored = plan_prompt_scores(stream, chunk);
  {
    std::lock_guard lock(mutex_);
    ++stats_.fill_steps;
    stats_.prompt_tokens += uint64_t(chunk.end - chunk.begin);
  }
  ++stream.next_chunk;
  if (last) stream.phase = Phase::decoding;
  // The prompt's logprobs reach the stream before its first token.
  auto after_run = [&] {
    cache_fill(stream, chunk.end);
    for (size_t i = round_streams_.size(); i < round_streams_.size() + scored; ++i)
      if (stream.events.on_prompt_logprobs) stream.events.on_prompt_logprobs(result_.logprobs[i]);
  };
  if (!run_plan(after_run)) return;
  if (last && !draws) {
    end(stream, {StreamEnd::Kind::finished, FinishReason::length, {}});
    return;
  }
  // The head takes in the chunk's rows inside the chunk, so the first round can already draft.
  if (stream.ended || !stream.drafts_on) return;
  draft_plan_.clear();
  draft_streams_.clear();
  absorb(stream, 0, chunk.begin, int32_t(chunk.end - chunk.begin), last);
  run_drafts();
}

void LaneHost::round() {
  plan_.clear();
  round_streams_.clear();
  windows_.clear();
  ForwardBatch& batch = plan_.batch;
  size_t width = 0;
  for (auto& stream : active_) width += stream->phase == Phase::decoding;
  const bool drafting = drafts_pay(width);
  // Drafts take the rows a pass has beyond one a stream, and with state a slot each.
  int64_t spare_rows = runner_.info().max_rows - int64_t(width);
  size_t next_slot = 0;
  for (auto& stream : active_) {
    if (stream->phase != Phase::decoding) continue;
    const int64_t position = int64_t(stream->tokens.size()) - 1;
    int64_t drafts = 0;
    if (drafting && stream->drafts_on) {
      drafts = std::min({int64_t(stream->drafts.size()), int64_t(draft_depth(*stream)), spare_rows});
      if (stream->memory.slot >= 0) drafts = std::min(drafts, int64_t(window_slots_.size() - next_slot));
    }
    spare_rows -= drafts;
    memory_.grow(stream->memory, position + 1 + drafts);
    const int32_t seq = int32_t(batch.seq_pages.size());
    const int32_t first_row = int32_t(batch.tokens.size());
    batch.seq_pages.push_back(&stream->memory.table);
    if (stream->memory.slot >= 0) batch.seq_slots.push_back(stream->memory.slot);
    for (int64_t j = 0; j <= drafts; ++j) {
      batch.tokens.push_back(j == 0 ? stream->tokens.back() : stream->drafts[size_t(j - 1)]);
      batch.positions.push_back(int32_t(position + j));
      batch.row_seq.push_back(seq);
      plan_token(*stream, first_row + int32_t(j), j);
      if (drafting && stream->memory.slot >= 0) batch.row_slots.push_back(j < drafts ? window_slots_[next_slot++] : -1);
    }
    windows_.push_back({stream.get(), first_row, int32_t(drafts)});
  }
  // Every row as one-row decoding computes it: a window's Mamba rows run the recurrence.
  batch.recurrent = drafting;
  {
    std::lock_guard lock(mutex_);
    ++stats_.rounds;
    stats_.round_rows += round_streams_.size();
    stats_.draft_rounds += drafting;
  }
  if (Status ran = runner_.run(plan_, result_); !ran.ok()) {
    fail_all(ran.message());
    return;
  }
  draft_plan_.clear();
  draft_streams_.clear();
  for (const Window& window : windows_) settle_window(window, drafting);
  if (drafting) run_drafts();
}

void LaneHost::plan_token(Stream& stream, int32_t logit_row, int64_t ahead) {
  // Penalties and logit_bias, from the stream's own tokens (a stream with them never drafts, so
  // its row is always its next position's).
  if (stream.counts && ahead == 0) stream.counts->edits(int32_t(plan_.batch.logit_rows.size()), plan_.edits);
  // A grammar's mask, from where the stream's own tokens stand in it (nor does it draft).
  // A spent thinking budget allows only the end of thinking.
  const bool constrained = stream.constraint && stream.constraint->active();
  const int32_t forced = stream.thinking && ahead == 0 && !constrained ? stream.thinking->forced() : -1;
  if (forced >= 0) {
    plan_.mask_rows.push_back(int32_t(plan_.batch.logit_rows.size()));
    append_single_token_mask(runner_.info().vocab_size, forced, plan_.mask_bits);
  } else if (constrained && ahead == 0) {
    plan_.mask_rows.push_back(int32_t(plan_.batch.logit_rows.size()));
    stream.constraint->append_mask(plan_.mask_bits);
  }
  plan_.batch.logit_rows.push_back(logit_row);
  plan_.samples.push_back({stream.request.sampling, int64_t(stream.tokens.size()) + ahead});
  plan_.top_logprobs.push_back(stream.request.top_logprobs);
  round_streams_.push_back(&stream);
}

size_t LaneHost::plan_prompt_scores(const Stream& stream, const FillChunk& chunk) {
  const int32_t top = stream.request.prompt_logprobs;
  const int64_t prompt = int64_t(stream.request.prompt.size());
  if (top < 0 || chunk.begin + 1 >= prompt) return 0;
  plan_.score_ids.resize(plan_.batch.logit_rows.size(), -1);
  const int64_t end = std::min(chunk.end, prompt - 1);
  for (int64_t p = chunk.begin; p < end; ++p) {
    plan_.batch.logit_rows.push_back(int32_t(p - chunk.begin));
    plan_.samples.push_back({SamplingParams{}, p + 1});  // greedy; the row takes its score id
    plan_.top_logprobs.push_back(top);
    plan_.score_ids.push_back(stream.request.prompt[size_t(p + 1)]);
  }
  return size_t(end - chunk.begin);
}

bool LaneHost::run_plan(const std::function<void()>& after_run) {
  if (Status ran = runner_.run(plan_, result_); !ran.ok()) {
    fail_all(ran.message());
    return false;
  }
  if (after_run) after_run();
  for (size_t i = 0; i < round_streams_.size(); ++i) accept_token(*round_streams_[i], result_.ids[i], result_.logprobs[i]);
  return true;
}

bool LaneHost::accept_token(Stream& stream, int32_t id, const TokenLogprobs& logprobs) {
  const int64_t position = int64_t(stream.tokens.size());
  stream.tokens.push_back(id);
  ++stream.generated;
  if (stream.counts) stream.counts->add(id);
  if (stream.constraint) stream.constraint->accept(id);
  if (stream.thinking) stream.thinking->accept(id);
  {
    std::lock_guard lock(mutex_);
    ++stats_.generated_tokens;
  }
  if (stream.request.top_logprobs >= 0 && stream.events.on_logprobs) stream.events.on_logprobs(logprobs);
  if (stream.events.on_token) stream.events.on_token(id);
  const std::optional<FinishReason> reason =
      finish_after(runner_.info(), stream.request, id, stream.generated, position,
                   stream.constraint ? &*stream.constraint : nullptr);
  if (!reason) {
    // A grammar whose next mask would hold up the lane thread fails its stream (only its own
    // tokens led there, so it fails the same way alone).
    if (stream.constraint && !stream.constraint->affordable()) {
      end(stream, {StreamEnd::Kind::failed, {}, kGrammarTooCostly});
      return false;
    }
    return !stream.control->cancelled.load();  // cancelled: the next step drops it
  }
  end(stream, {StreamEnd::Kind::finished, *reason, {}});
  return false;
}

void LaneHost::end(Stream& stream, StreamEnd how) {
  stream.ended = true;
  how.cached_tokens = stream.cached;
  how.drafted = stream.drafted;
  how.accepted_drafts = stream.accepted;
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
    if (!stream->ended) end(*stream, {StreamEnd::Kind::failed, {}, error});
}

}  // namespace lockstep
