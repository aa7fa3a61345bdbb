// LaneHost, part two (lane_host.h): its two kinds of work, a fill step and a round, and how a
// stream ends. Part one, lane_host.cpp: submission, the loop, admission.
#include <algorithm>

#include "lanes/lane_host.h"

namespace lockstep {

bool LaneHost::waits_for_shared_fill(const Stream& stream) const {
  // Before its first chunk, a stream whose prompt starts as an older filling stream's does
  // waits for that fill to end, then resumes from what it cached (take_longer_prefix): a
  // shared system prompt is filled once. One page in common is enough to wait for.
  if (!caches(stream) || stream.next_chunk != 0) return false;
  const int64_t page = memory_.pages().page_size();
  for (const auto& older : active_) {
    if (older.get() == &stream) return false;  // only older streams, in admission order
    if (older->phase != Phase::filling || older->ended) continue;
    const std::vector<int32_t>& a = stream.request.prompt;
    const std::vector<int32_t>& b = older->request.prompt;
    const size_t need = size_t(stream.cached + page);  // compared no further than that
    if (a.size() >= need && b.size() >= need && std::equal(a.begin(), a.begin() + int64_t(need), b.begin()))
      return true;
  }
  return false;
}

void LaneHost::fill_step(bool with_rounds) {
  plan_.clear();
  round_streams_.clear();
  windows_.clear();
  filled_.clear();
  ForwardBatch& batch = plan_.batch;
  // The decoding streams ride along, a row each, so a long fill never stalls them: a row
  // computes what it does in a round (every op is row-invariant). No drafts: a verify window's
  // rows run the recurrence, and the fill rows beside them would too.
  const size_t width = with_rounds ? decoding_streams() : 0;
  if (with_rounds) plan_windows(false);
  // Then the next chunk of each filling stream, oldest first, while the pass has rows: each
  // chunk is the one its plan cuts (fill_plan), so packing changes no bits. The oldest always
  // fills.
  const int64_t max_rows = std::max<int64_t>(runner_.info().max_rows, 1);
  const int64_t max_logit_rows = logit_row_limit(runner_.info());
  int64_t logits = int64_t(batch.logit_rows.size());  // the decoding rows'; then each chunk's
  for (auto& candidate : active_) {
    Stream& stream = *candidate;
    if (stream.phase != Phase::filling || stream.ended) continue;
    const int64_t rows = int64_t(batch.tokens.size());
    // A resumed prefix only shortens the next chunk, so the planned one bounds it.
    const FillChunk planned = stream.plan[stream.next_chunk];
    if (!filled_.empty() && rows + (planned.end - planned.begin) > max_rows) continue;
    if (!filled_.empty() && logits + chunk_logit_rows(stream, planned) > max_logit_rows) continue;
    if (!filled_.empty() && waits_for_shared_fill(stream)) continue;
    take_longer_prefix(stream);
    const FillChunk chunk = stream.plan[stream.next_chunk];
    // A resumed prefix can make the chunk its prompt's last, with a draw: counted again (the
    // stream keeps its resumed plan and fills in a later pass).
    if (!filled_.empty() && logits + chunk_logit_rows(stream, chunk) > max_logit_rows) continue;
    const bool last = stream.next_chunk + 1 == stream.plan.size();
    memory_.grow(stream.memory, chunk.end);
    const int32_t seq = int32_t(batch.seq_pages.size()), first_row = int32_t(rows);
    batch.seq_pages.push_back(&stream.memory.table);
    if (stream.memory.slot >= 0) batch.seq_slots.push_back(stream.memory.slot);
    for (int64_t p = chunk.begin; p < chunk.end; ++p) {
      batch.tokens.push_back(stream.tokens[size_t(p)]);
      batch.positions.push_back(int32_t(p));
      batch.row_seq.push_back(seq);
    }
    // max_tokens 0: the prompt is filled (for its logprobs) and nothing drawn.
    const bool draws = last && stream.request.max_tokens > 0;
    if (draws) plan_token(stream, first_row + int32_t(chunk.end - chunk.begin) - 1, 0);
    logits += chunk_logit_rows(stream, chunk);
    filled_.push_back({&stream, chunk, first_row, last, draws, 0});
  }
  // Every token row comes before the prompt-scoring rows (round_streams_ indexes the first).
  for (Filled& fill : filled_) fill.scored = plan_prompt_scores(*fill.stream, fill.chunk, fill.first_row);
  {
    std::lock_guard lock(mutex_);
    ++stats_.fill_steps;
    for (const Filled& fill : filled_) stats_.prompt_tokens += uint64_t(fill.chunk.end - fill.chunk.begin);
    if (width > 0) ++stats_.rounds, stats_.round_rows += width;
  }
  for (const Filled& fill : filled_) {
    ++fill.stream->next_chunk;
    if (fill.last) fill.stream->phase = Phase::decoding;
  }
  if (Status ran = run_pass(); !ran.ok()) {
    fail_all(ran.message());
    return;
  }
  // Each filled stream: what its chunk completed goes to the prompt cache, its prompt's
  // logprobs reach it before its first token, then the first token.
  const bool drafting = drafts_pay(width);
  draft_plan_.clear();
  draft_streams_.clear();
  size_t score_row = round_streams_.size();
  size_t token_row = windows_.size();  // the decoding rows' logit rows come first
  for (const Filled& fill : filled_) {
    Stream& stream = *fill.stream;
    cache_fill(stream, fill.chunk.end);
    for (size_t i = score_row; i < score_row + fill.scored; ++i)
      if (stream.events.on_prompt_logprobs) stream.events.on_prompt_logprobs(result_.logprobs[i]);
    score_row += fill.scored;
    if (fill.draws) {
      accept_token(stream, result_.ids[token_row], result_.logprobs[token_row]);
      ++token_row;
    } else if (fill.last) {
      end(stream, {StreamEnd::Kind::finished, FinishReason::length, {}});
    }
    // The head takes in the chunk's rows inside the chunk (after the first token, which the
    // last row pairs with), so the first round can already draft.
    if (!stream.ended && stream.drafts_on)
      absorb(stream, fill.first_row, fill.chunk.begin, int32_t(fill.chunk.end - fill.chunk.begin), fill.draws);
  }
  for (const Window& window : windows_) settle_window(window, drafting);
  run_drafts();
}

Status LaneHost::run_pass() {
  const auto start = std::chrono::steady_clock::now();
  Status ran = runner_.run(plan_, result_);
  count_seconds(&LaneStats::pass_seconds, start);
  return ran;
}

void LaneHost::count_seconds(double LaneStats::*time, std::chrono::steady_clock::time_point since) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  std::lock_guard lock(mutex_);
  stats_.*time += seconds;
}

size_t LaneHost::decoding_streams() const {
  size_t width = 0;
  for (const auto& stream : active_) width += stream->phase == Phase::decoding;
  return width;
}

void LaneHost::plan_windows(bool drafting) {
  ForwardBatch& batch = plan_.batch;
  // Drafts take the rows (and logit rows) a pass has beyond one a stream, and with state a slot each.
  const ModelInfo& info = runner_.info();
  int64_t spare_rows = std::min(info.max_rows, logit_row_limit(info)) - int64_t(decoding_streams());
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
    const int32_t first_row = int32_t(batch.tokens.size()), first_slot = int32_t(next_slot);
    batch.seq_pages.push_back(&stream->memory.table);
    if (stream->memory.slot >= 0) batch.seq_slots.push_back(stream->memory.slot);
    for (int64_t j = 0; j <= drafts; ++j) {
      batch.tokens.push_back(j == 0 ? stream->tokens.back() : stream->drafts[size_t(j - 1)]);
      batch.positions.push_back(int32_t(position + j));
      batch.row_seq.push_back(seq);
      plan_token(*stream, first_row + int32_t(j), j);
      if (drafting && stream->memory.slot >= 0) batch.row_slots.push_back(j < drafts ? window_slots_[next_slot++] : -1);
    }
    windows_.push_back({stream.get(), first_row, int32_t(drafts), first_slot});
  }
}

void LaneHost::round() {
  plan_.clear();
  round_streams_.clear();
  windows_.clear();
  const bool drafting = drafts_pay(decoding_streams());
  plan_windows(drafting);
  // Every row as one-row decoding computes it: a window's Mamba rows run the recurrence.
  plan_.batch.recurrent = drafting;
  // A draft round verifies drafts: a stream that takes none (draft: false, penalties) drafts nothing.
  const bool verifies = std::any_of(windows_.begin(), windows_.end(), [](const Window& w) { return w.drafts > 0; });
  {
    std::lock_guard lock(mutex_);
    ++stats_.rounds;
    stats_.round_rows += round_streams_.size();
    stats_.draft_rounds += verifies;
  }
  if (Status ran = run_pass(); !ran.ok()) {
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

// The prompt positions of `chunk` scored for the stream's prompt logprobs: [chunk.begin, end).
int64_t LaneHost::scored_end(const Stream& stream, const FillChunk& chunk) {
  const int64_t prompt = int64_t(stream.request.prompt.size());
  if (stream.request.prompt_logprobs < 0 || chunk.begin + 1 >= prompt) return chunk.begin;
  return std::min(chunk.end, prompt - 1);
}

int64_t LaneHost::chunk_logit_rows(const Stream& stream, const FillChunk& chunk) {
  const bool draws = stream.next_chunk + 1 == stream.plan.size() && stream.request.max_tokens > 0;
  return (draws ? 1 : 0) + scored_end(stream, chunk) - chunk.begin;
}

size_t LaneHost::plan_prompt_scores(const Stream& stream, const FillChunk& chunk, int32_t first_row) {
  const int32_t top = stream.request.prompt_logprobs;
  const int64_t end = scored_end(stream, chunk);
  if (end == chunk.begin) return 0;
  plan_.score_ids.resize(plan_.batch.logit_rows.size(), -1);
  for (int64_t p = chunk.begin; p < end; ++p) {
    plan_.batch.logit_rows.push_back(first_row + int32_t(p - chunk.begin));
    plan_.samples.push_back({SamplingParams{}, p + 1});  // greedy; the row takes its score id
    plan_.top_logprobs.push_back(top);
    plan_.score_ids.push_back(stream.request.prompt[size_t(p + 1)]);
  }
  return size_t(end - chunk.begin);
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
