// LaneHost, part three (lane_host.h): the prompt cache. Where a stream may start, and what it
// leaves behind for later streams (memory/prefix_cache.h keeps the index).
//
// What may be reused is what a cold fill of a later prompt would compute bit for bit:
// - Models without recurrent state: a position's K and V depend only on the tokens up to it
//   (every op is row-invariant, and how a fill is cut changes no bits), so every whole page a
//   stream wrote, prompt or reply, fill or round, is cached.
// - Models with state (Mamba2): how the scan is cut changes its bits, so a stream resumes only
//   at a cut of the fill plan, from a snapshot of the state taken there, and only the pages
//   below it are cached. Snapshots are taken at the last cut of each prompt, every
//   snapshot_every chunks of a long one, and where a fill is cancelled between chunks.
#include "lanes/lane_host.h"

namespace lockstep {

bool LaneHost::caches(const Stream& stream) const {
  // A stream that scores its prompt computes every row of it, so it starts from nothing.
  return memory_.cache() != nullptr && stream.request.cache_prompt && stream.request.prompt_logprobs < 0;
}

PrefixCache::Match LaneHost::cached_prefix(const Stream& stream) {
  if (!caches(stream)) return {};
  const std::vector<int32_t>& prompt = stream.request.prompt;
  // At least the last prompt position is filled: its logits give the first token.
  const bool keeps_state = runner_.info().state_slots > 0;
  return memory_.cache()->lookup(prompt, int64_t(prompt.size()) - 1, keeps_state);
}

void LaneHost::take_longer_prefix(Stream& stream) {
  if (!caches(stream) || stream.next_chunk != 0) return;
  const PrefixCache::Match cached = cached_prefix(stream);
  if (cached.tokens <= stream.cached) return;
  if (memory_.extend_shared(stream.memory, stream_length_bound(runner_.info(), stream.request), cached))
    start_from(stream, cached);
}

void LaneHost::start_from(Stream& stream, const PrefixCache::Match& cached) {
  // A cached prefix is not filled again; the state of models that keep one starts where the
  // snapshot left it. The plan's cuts are the whole prompt's (fill_plan cuts at absolute
  // positions), so the chunks that do run are the ones a cold fill runs.
  if (cached.snapshot_block >= 0) memory_.cache()->load_snapshot(cached, stream.memory.slot);
  {
    std::lock_guard lock(mutex_);
    stats_.cache_hits += stream.cached == 0 && cached.tokens > 0;
    stats_.cached_tokens += uint64_t(cached.tokens - stream.cached);
  }
  stream.cached = cached.tokens;
  stream.plan = fill_plan(stream.cached, int64_t(stream.tokens.size()), settings_.chunk_size);
}

bool LaneHost::is_snapshot_cut(const Stream& stream, int64_t position) const {
  const int64_t chunk = settings_.chunk_size;
  if (position <= 0 || position % chunk != 0) return false;
  const int64_t last_cut = int64_t(stream.request.prompt.size()) / chunk * chunk;
  return position == last_cut || (position / chunk) % std::max(1, settings_.snapshot_every) == 0;
}

void LaneHost::cache_fill(Stream& stream, int64_t end) {
  if (!caches(stream)) return;
  if (stream.memory.slot < 0)
    cache_prefix(stream, end, false);
  else if (is_snapshot_cut(stream, end))
    cache_prefix(stream, end, true);
}

void LaneHost::cache_ending(Stream& stream, const StreamEnd& how) {
  if (!caches(stream) || how.kind == StreamEnd::Kind::failed) return;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;  // nobody will resume: stop quickly
  }
  // The positions whose K and V are written: the landed chunks of a fill; every token but the
  // last (which was never fed back) once decoding.
  int64_t written = stream.cached;
  if (stream.phase == Phase::decoding)
    written = int64_t(stream.tokens.size()) - 1;
  else if (stream.next_chunk > 0)
    written = stream.plan[stream.next_chunk - 1].end;
  if (stream.memory.slot < 0)
    cache_prefix(stream, written, false);
  else if (stream.phase == Phase::filling && written > stream.cached && !is_snapshot_cut(stream, written))
    cache_prefix(stream, written, true);  // cancelled between chunks: a resend resumes here
}

void LaneHost::cache_prefix(Stream& stream, int64_t length, bool snapshot) {
  PrefixCache& cache = *memory_.cache();
  if (!snapshot) {
    cache.insert(stream.tokens, stream.memory.table, length);
    return;
  }
  if (length % runner_.info().page_size != 0) return;  // a snapshot sits at the end of a block
  cache.insert(stream.tokens, stream.memory.table, length, stream.memory.slot);
}

void LaneHost::note_memory() {
  stats_.unreserved_pages = memory_.unreserved_pages();
  stats_.free_slots = memory_.free_slots();
  if (memory_.cache()) stats_.cache = memory_.cache()->stats();
}

}  // namespace lockstep
