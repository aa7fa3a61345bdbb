#include "lanes/lane_host.h"

#include <algorithm>

namespace lockstep {

void StreamHandle::cancel() const {
  if (!control_) return;
  control_->cancelled.store(true);
  if (host_) host_->wake();
}

namespace {

// The state slots the prompt cache keeps snapshots in: the model's last snapshot_slots, never
// all of them (streams need one).
int32_t cache_slots(const ModelInfo& info, const LaneSettings& settings) {
  if (!settings.prompt_cache || info.state_slots <= 0) return 0;
  return std::clamp(settings.snapshot_slots, 0, info.state_slots - 1);
}

// The state slots that hold verify windows' per-row states: draft_width * draft_tokens, the last
// before the cache's (none for models without state or without drafts).
int32_t window_slots(const ModelInfo& info, const LaneSettings& settings) {
  if (info.state_slots <= 0 || settings.draft_tokens <= 0) return 0;
  return settings.draft_width * settings.draft_tokens;
}

// The settings as the model allows them: drafts need a head, and with state a slot per draft
// of the widest drafting round (fewer slots narrow the width; none turn drafts off), leaving
// at least one slot for streams.
LaneSettings fit_drafts(const ModelInfo& info, LaneSettings settings) {
  settings.draft_tokens = info.draft_head ? std::clamp(settings.draft_tokens, 0, kMaxDraftTokens) : 0;
  settings.draft_width = std::max(0, settings.draft_width);
  if (settings.draft_tokens > 0 && info.state_slots > 0) {
    const int32_t spare = info.state_slots - cache_slots(info, settings) - 1;
    settings.draft_width = std::min(settings.draft_width, spare / settings.draft_tokens);
  }
  if (settings.draft_width == 0) settings.draft_tokens = 0;
  return settings;
}

// How the memory the lane host plans reaches the model: the prompt cache copies pages and states
// through the runner.
StreamMemorySettings memory_settings(StepRunner& runner, const LaneSettings& settings) {
  const ModelInfo& info = runner.info();
  StreamMemorySettings memory{info.kv_pages, info.page_size, info.state_slots, settings.prompt_cache,
                              settings.host_bytes, {}, {}};
  const int32_t reserved = cache_slots(info, settings);
  memory.state_slots -= reserved + window_slots(info, settings);
  memory.page_copies.bytes = runner.page_bytes();
  memory.page_copies.save = [&runner](int32_t page, std::byte* dst) { runner.save_page(page, dst); };
  memory.page_copies.load = [&runner](const std::byte* src, int32_t page) { runner.load_page(src, page); };
  memory.state_copies.bytes = runner.state_bytes();
  for (int32_t slot = info.state_slots - reserved; slot < info.state_slots; ++slot)
    memory.state_copies.slots.push_back(slot);
  memory.state_copies.save = [&runner](int32_t slot, std::byte* dst) { runner.save_state(slot, dst); };
  memory.state_copies.load = [&runner](const std::byte* src, int32_t slot) { runner.load_state(src, slot); };
  memory.state_copies.copy = [&runner](int32_t from, int32_t to) { runner.copy_state(from, to); };
  return memory;
}

}  // namespace

LaneHost::LaneHost(StepRunner& runner, LaneSettings settings)
    : runner_(runner), settings_(fit_drafts(runner.info(), settings)), memory_(memory_settings(runner, settings_)) {
  const ModelInfo& info = runner.info();
  note_memory();
  // A chunk, and a round of every stream, each fit a pass's rows and its logit rows (a chunk
  // scored for prompt logprobs asks for a logit row a token).
  const int64_t pass_rows = std::min(info.max_rows, logit_row_limit(info));
  settings_.chunk_size = std::max<int64_t>(1, std::min(settings_.chunk_size, pass_rows));
  settings_.max_streams = std::max(1, std::min<int32_t>(settings_.max_streams, int32_t(pass_rows)));
  const int32_t cached = cache_slots(info, settings_), windows = window_slots(info, settings_);
  if (info.state_slots > 0) settings_.max_streams = std::min(settings_.max_streams, info.state_slots - cached - windows);
  for (int32_t slot = info.state_slots - cached - windows; slot < info.state_slots - cached; ++slot)
    window_slots_.push_back(slot);
  stats_.drafted_at.assign(size_t(settings_.draft_tokens), 0);
  stats_.accepted_at.assign(size_t(settings_.draft_tokens), 0);
}

LaneHost::~LaneHost() { stop(); }

LaneHost::Submitted LaneHost::submit(GenerateRequest request, StreamEvents events) {
  const ModelInfo& info = runner_.info();
  if (auto problem = check_request(info, request))
    return {std::nullopt, SubmitError{SubmitError::Kind::invalid, problem->message, problem->field}};
  if (!memory_.fits_ever(stream_length_bound(info, request)))
    return {std::nullopt, SubmitError{SubmitError::Kind::invalid,
                                      "the prompt plus max_tokens needs more KV pages than the server has",
                                      "max_tokens"}};
  auto stream = std::make_unique<Stream>();
  stream->request = std::move(request);
  stream->events = std::move(events);
  stream->control = std::make_shared<StreamControl>();
  std::lock_guard lock(mutex_);
  if (stopping_) return {std::nullopt, SubmitError{SubmitError::Kind::busy, "the server is shutting down", ""}};
  // The queue is of streams that must wait: those the free stream places will admit do not count.
  const int64_t places = std::max<int64_t>(0, settings_.max_streams - stats_.active);
  if (stats_.queued >= settings_.max_queue + places)
    return {std::nullopt, SubmitError{SubmitError::Kind::busy, "the queue is full; retry later", ""}};
  stream->id = next_id_++;
  StreamHandle handle(stream->id, stream->control, this);
  incoming_.push_back(std::move(stream));
  ++stats_.queued;
  woken_ = true;
  wake_.notify_one();
  return {handle, std::nullopt};
}

void LaneHost::wake() {
  std::lock_guard lock(mutex_);
  woken_ = true;
  wake_.notify_one();
}

LaneStats LaneHost::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void LaneHost::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { run_loop(); });
}

void LaneHost::stop() {
  std::lock_guard stop_lock(stop_mutex_);  // a signal watcher and the main thread may both stop
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  take_submissions();
  for (auto& stream : queued_) stream->control->cancelled.store(true);
  for (auto& stream : active_) stream->control->cancelled.store(true);
  drop_cancelled();
}

void LaneHost::run_loop() {
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    if (step()) continue;
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [&] { return woken_ || stopping_; });
    woken_ = false;
  }
}

bool LaneHost::step() {
  take_submissions();
  drop_cancelled();
  admit();
  Stream* oldest_filling = nullptr;
  int64_t decoding = 0;
  for (auto& stream : active_) {
    if (stream->phase == Phase::filling && !oldest_filling) oldest_filling = stream.get();
    decoding += stream->phase == Phase::decoding;
  }
  // The decoding rows ride in a fill step when they fit beside the oldest filling stream's
  // chunk, rows and logit rows; where they do not (a pass of the model's max_rows holds a chunk
  // and no more), fill steps without them and rounds alternate.
  const auto start = std::chrono::steady_clock::now();
  const auto rides = [&] {
    const FillChunk& next = oldest_filling->plan[oldest_filling->next_chunk];
    return decoding + (next.end - next.begin) <= runner_.info().max_rows &&
           decoding + chunk_logit_rows(*oldest_filling, next) <= logit_row_limit(runner_.info());
  };
  if (oldest_filling && (decoding == 0 || rides())) {
    fill_step(true);
    last_was_fill_ = true;
  } else if (decoding > 0 && (last_was_fill_ || !oldest_filling)) {
    round();
    last_was_fill_ = false;
  } else if (oldest_filling) {
    fill_step(false);
    last_was_fill_ = true;
  } else {
    return false;
  }
  count_seconds(&LaneStats::step_seconds, start);
  // Streams that ended during the step leave the active list.
  active_.erase(std::remove_if(active_.begin(), active_.end(), [](const auto& stream) { return stream->ended; }),
                active_.end());
  return true;
}

void LaneHost::take_submissions() {
  std::lock_guard lock(mutex_);
  while (!incoming_.empty()) {
    queued_.push_back(std::move(incoming_.front()));
    incoming_.pop_front();
  }
}

void LaneHost::drop_cancelled() {
  for (auto& stream : active_)
    if (stream && stream->control->cancelled.load()) end(*stream, {StreamEnd::Kind::cancelled, {}, {}}), stream.reset();
  active_.erase(std::remove(active_.begin(), active_.end(), nullptr), active_.end());
  for (auto& stream : queued_)
    if (stream->control->cancelled.load()) end(*stream, {StreamEnd::Kind::cancelled, {}, {}}), stream.reset();
  queued_.erase(std::remove(queued_.begin(), queued_.end(), nullptr), queued_.end());
}

void LaneHost::admit() {
  while (!queued_.empty() && int32_t(active_.size()) < settings_.max_streams) {
    Stream& next = *queued_.front();
    const PrefixCache::Match cached = cached_prefix(next);
    auto hold = memory_.admit(stream_length_bound(runner_.info(), next.request), cached.tokens > 0 ? &cached : nullptr);
    if (!hold) break;  // first come, first served: later streams wait too
    next.memory = std::move(*hold);
    next.admitted = true;
    next.tokens = next.request.prompt;
    // A window's rows would each need the counts of the drafts before them: such streams do not draft.
    // So would a grammar's masks.
    next.drafts_on = settings_.draft_tokens > 0 && next.request.draft && !next.request.adjust.any() &&
                     !next.request.grammar && next.request.think_budget < 0;
    if (next.request.think_budget >= 0) next.thinking.emplace(next.request);
    if (next.request.adjust.any()) next.counts.emplace(next.request.adjust, next.request.prompt);
    if (next.request.grammar) next.constraint.emplace(next.request.grammar, next.request.grammar_after);
    start_from(next, cached);
    active_.push_back(std::move(queued_.front()));
    queued_.pop_front();
    std::lock_guard lock(mutex_);
    --stats_.queued;
    ++stats_.active;
    if (caches(*active_.back())) ++stats_.cache_lookups;
    note_memory();
  }
}

}  // namespace lockstep
