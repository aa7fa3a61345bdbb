// The lane host: one thread owns the model and decides what runs next, a fill step or a round
// (one row of every decoding stream, or its verify window, in one forward pass).
//
// Policy: admit queued streams in arrival order while their memory fits; then, while some
// stream is filling, run a fill step: one pass with a row of every decoding stream and the next
// chunk of each filling stream, oldest first, while the pass has rows (the model's max_rows;
// the oldest always fills), so new prompts do not each cost a pass of their own and a decoding
// stream gets a token every pass, however long a prompt fills beside it. A stream whose prompt
// starts as an older filling one's waits for it, to resume from what it cached. Where the
// decoding rows do not fit beside the oldest chunk, fill steps without them and rounds
// alternate. Otherwise run a round, which verifies drafts where they pay.
//
// Exactness: a stream's tokens never depend on the other streams. Every op is row-invariant,
// the fill plan cuts at fixed positions (fill_plan), and each draw is keyed by (seed, position).
//
// Thread-safety: submit(), stats() and StreamHandle::cancel() may be called from any thread.
// Events are delivered on the lane thread (or the thread calling step()), in order: tokens,
// then one end; a callback must not block, since every other stream waits while it runs.
//
// Drafts (models with an MTP head): a drafting stream's row in a round becomes a verify window,
// its last token and the head's drafts at the positions after it; each row's token is the one
// the position-keyed draw picks there, drafts are accepted while they equal it, and the stream
// rolls back (state from the window's row slots; pages past it are simply rewritten) to the
// last accepted one. So its tokens are those it gets without drafts (lane_drafts.cpp).
//
// Code: lane_host.cpp (submission, the loop, admission), lane_steps.cpp (fill steps, rounds,
// accepting tokens, ending streams), lane_drafts.cpp (windows and the head), lane_cache.cpp
// (the prompt cache).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lanes/fill_plan.h"
#include "lanes/request.h"
#include "lanes/step_runner.h"
#include "memory/stream_memory.h"

namespace lockstep {

constexpr int32_t kMaxDraftTokens = 8;  // the most drafts a stream verifies in one round

struct LaneSettings {
  int64_t chunk_size = 256;  // fill chunk in tokens; part of the numerics, keep it fixed
  int32_t max_streams = 8;   // streams admitted at once (--parallel)
  int32_t max_queue = 64;    // streams waiting for admission; past it submit() refuses
  // The prompt cache (memory/prefix_cache.h): off, or on with this much host memory for
  // snapshots of recurrent state and the KV pages it evicts from the device.
  bool prompt_cache = false;
  size_t host_bytes = 0;
  // Models with state: how many of the model's state slots (its last) hold the cache's
  // snapshots on the device, not streams.
  int32_t snapshot_slots = 0;
  int32_t snapshot_every = 16;  // chunks between snapshots of a long prompt's state
  // Drafts (models with an MTP head, ModelInfo::draft_head): how many a stream verifies each
  // round (0: none), and the widest round that drafts (a wider one runs a row a stream, which
  // pays better there). Models with state also need draft_width * draft_tokens state slots
  // (the last before the cache's) for the windows' rollback; fewer narrow the width.
  int32_t draft_tokens = 0;
  int32_t draft_width = 16;
};

struct StreamEnd {
  enum class Kind { finished, cancelled, failed } kind = Kind::finished;
  FinishReason reason = FinishReason::length;  // when finished
  std::string error;                           // when failed
  int64_t cached_tokens = 0;                   // prompt positions the prompt cache gave, not filled
  int64_t drafted = 0;                         // drafts verified
  int64_t accepted_drafts = 0;                 // generated tokens that were drafts the model agreed with
};

struct StreamEvents {
  std::function<void(int32_t id)> on_token = nullptr;      // each generated id, in order
  std::function<void(const StreamEnd&)> on_end = nullptr;  // exactly once, last
  std::function<void(const TokenLogprobs&)> on_logprobs = nullptr;  // before on_token, when asked
  // With prompt_logprobs: prompt tokens 1, 2, ... in order, before the first on_token.
  std::function<void(const TokenLogprobs&)> on_prompt_logprobs = nullptr;
};

// Shared between a stream and whoever may cancel it.
struct StreamControl {
  std::atomic<bool> cancelled{false};
};

class LaneHost;

// A submitted stream. cancel() may be called any time, from any thread, any number of times.
class StreamHandle {
 public:
  StreamHandle() = default;
  StreamHandle(uint64_t id, std::shared_ptr<StreamControl> control, LaneHost* host)
      : id_(id), control_(std::move(control)), host_(host) {}
  uint64_t id() const { return id_; }
  void cancel() const;

 private:
  uint64_t id_ = 0;
  std::shared_ptr<StreamControl> control_;
  LaneHost* host_ = nullptr;
};

// Why submit() refused: a request that can never run, or a full queue (retry later).
struct SubmitError {
  enum class Kind { invalid, busy } kind;
  std::string message;
  std::string field;  // invalid: the request field at fault (RequestProblem::field), if one is
};

// Counters for metrics and tests. Read with LaneHost::stats().
struct LaneStats {
  uint64_t fill_steps = 0, rounds = 0, round_rows = 0;
  uint64_t prompt_tokens = 0, generated_tokens = 0;
  uint64_t finished = 0, cancelled = 0, failed = 0;
  int64_t queued = 0, active = 0;
  int32_t unreserved_pages = 0, free_slots = 0;  // memory not promised to any stream
  // The prompt cache: admissions that looked, those that found a prefix, the positions found.
  uint64_t cache_lookups = 0, cache_hits = 0, cached_tokens = 0;
  PrefixCacheStats cache;
  // Drafts: rounds that drafted; drafts verified and accepted, in all and by place in the
  // window ([0]: the first draft after the stream's last token); head passes that failed.
  uint64_t draft_rounds = 0, drafted = 0, accepted = 0, draft_failures = 0;
  std::vector<uint64_t> drafted_at, accepted_at;
  // Seconds of the lane thread's steps (fill steps and rounds), and of the part of them spent in
  // the model's passes (StepRunner::run, to its results on the host) and in the MTP head's
  // (StepRunner::draft): the rest is the host's work around them.
  double step_seconds = 0, pass_seconds = 0, head_seconds = 0;
};

class LaneHost {
 public:
  // The runner must outlive the host; only the lane thread (or step()'s caller) uses it.
  LaneHost(StepRunner& runner, LaneSettings settings);
  ~LaneHost();
  LaneHost(const LaneHost&) = delete;
  LaneHost& operator=(const LaneHost&) = delete;

  const LaneSettings& settings() const { return settings_; }
  const ModelInfo& info() const { return runner_.info(); }

  // Queues a stream. Refuses at once (nothing queued) a request that is invalid or can never
  // fit in memory, and a request that finds the queue full.
  struct Submitted {
    std::optional<StreamHandle> handle;
    std::optional<SubmitError> error;
  };
  Submitted submit(GenerateRequest request, StreamEvents events);

  // Runs the loop on a thread of its own until stop(). stop() cancels every stream (each gets
  // its end event) and joins; later submissions are refused as busy. stop() may be called
  // from several threads, more than once.
  void start();
  void stop();
  // One iteration on the calling thread (only while not started): admit, then one fill step or
  // one round. Returns false when there was nothing to do.
  bool step();

  LaneStats stats() const;
  // Wakes the loop (a cancel, a submission).
  void wake();

 private:
  enum class Phase { filling, decoding };
  struct Stream {
    uint64_t id;
    GenerateRequest request;
    StreamEvents events;
    std::shared_ptr<StreamControl> control;
    Phase phase = Phase::filling;
    bool admitted = false;
    StreamMemoryHold memory;
    std::vector<FillChunk> plan;
    size_t next_chunk = 0;
    std::vector<int32_t> tokens;  // prompt, then generated ids
    int64_t generated = 0;
    int64_t cached = 0;           // prompt positions the prompt cache gave
    bool ended = false;           // has had its end event; leaves active_ after the step
    bool drafts_on = false;       // verifies drafts (the server drafts and the request allows it)
    std::vector<int32_t> drafts;  // the head's proposals for the positions after tokens.back()
    int64_t drafted = 0, accepted = 0;  // drafts verified, and those accepted and delivered
    std::optional<TokenCounts> counts;  // with penalties or logit_bias: the tokens they count
    std::optional<Constraint> constraint;  // with a grammar: where its tokens stand in it
    std::optional<ThinkingBudget> thinking;  // with a thinking budget
  };
  // A decoding stream's rows in a round: from first_row, its last token then `drafts` drafts;
  // with state, row j < drafts keeps its state in window_slots_[first_slot + j].
  struct Window {
    Stream* stream;
    int32_t first_row, drafts, first_slot;
  };
  // A filling stream's chunk in a fill step: its rows from first_row; the last of its prompt;
  // whether it draws the first token; its prompt-scoring logit rows.
  struct Filled {
    Stream* stream;
    FillChunk chunk;
    int32_t first_row;
    bool last, draws;
    size_t scored;
  };

  void run_loop();
  void take_submissions();
  void drop_cancelled();
  void admit();
  // One pass: with `with_rounds` a row of every decoding stream, then the next chunk of each
  // filling stream, oldest first, while the pass has rows (the oldest always); no drafts
  // verified.
  void fill_step(bool with_rounds);
  // Whether a stream must wait to fill until an older one has filled the prompt start they share.
  bool waits_for_shared_fill(const Stream& stream) const;
  void round();
  size_t decoding_streams() const;
  // Adds to plan_ a window a decoding stream: its last token and, when drafting, the drafts it
  // may verify (each window in windows_, each row a logit row, in row order).
  void plan_windows(bool drafting);
  // Adds a logit row for the stream's next token to plan_ (its sampling and logprobs asks).
  // `ahead`: positions past the stream's next (a window's later rows).
  void plan_token(Stream& stream, int32_t logit_row, int64_t ahead);
  // With prompt_logprobs: a scoring logit row for each chunk row (the chunk's rows from
  // first_row) whose next token is the prompt's (after every plan_token row). Returns how many.
  size_t plan_prompt_scores(const Stream& stream, const FillChunk& chunk, int32_t first_row);
  // The logit rows filling `chunk` (the stream's next) asks for: its draw, if it is the last,
  // and its prompt-scoring rows.
  static int64_t scored_end(const Stream& stream, const FillChunk& chunk);
  static int64_t chunk_logit_rows(const Stream& stream, const FillChunk& chunk);
  // Reports `id` (with its logprobs when asked) as the token at the stream's next position and
  // ends the stream if it is done (finish_after).
  // Returns false when the stream has ended (or been cancelled) and takes no more tokens.
  bool accept_token(Stream& stream, int32_t id, const TokenLogprobs& logprobs);
  // Drafts (lane_drafts.cpp). Whether rounds this wide draft; how many drafts the stream may
  // verify next (its remaining tokens and reach); the verdict on a window; the head's pass
  // over the rows a step settled, which leaves each drafting stream its drafts for next round.
  bool drafts_pay(size_t width) const;
  int32_t draft_depth(const Stream& stream) const;
  void settle_window(const Window& window, bool drafting);
  // Plans the head's pass over `rows` rows of the step's pass from first_row (positions from
  // first_position), each with the token after it; `drafts`: and the stream's next drafts.
  void absorb(Stream& stream, int32_t first_row, int64_t first_position, int32_t rows, bool drafts);
  void run_drafts();
  // The step's pass (runner_.run of plan_ into result_), its time counted in stats_.
  Status run_pass();
  // Adds the seconds since `since` to one of stats_'s times.
  void count_seconds(double LaneStats::*time, std::chrono::steady_clock::time_point since);
  void end(Stream& stream, StreamEnd how);
  // Prompt cache (lane_cache.cpp): where a stream may start, what it leaves for later streams.
  bool caches(const Stream& stream) const;
  PrefixCache::Match cached_prefix(const Stream& stream);
  // Before a stream's first fill chunk: streams admitted together with it may have cached more
  // of its prompt since its lookup (the oldest fills first); resume from that instead.
  void take_longer_prefix(Stream& stream);
  // Plans the stream's fill from the end of `cached` (empty: from 0), restoring its snapshot.
  void start_from(Stream& stream, const PrefixCache::Match& cached);
  // After a fill chunk ending at `end` ran: cache what it completed.
  void cache_fill(Stream& stream, int64_t end);
  // Before a stream's memory goes back: cache what it wrote that a later stream can resume.
  void cache_ending(Stream& stream, const StreamEnd& how);
  // Caches the stream's whole blocks below `length`, with a snapshot of its state there.
  void cache_prefix(Stream& stream, int64_t length, bool snapshot);
  bool is_snapshot_cut(const Stream& stream, int64_t position) const;
  // Copies the memory and cache counters into stats_ (mutex_ held).
  void note_memory();
  void fail_all(const std::string& error);

  StepRunner& runner_;
  LaneSettings settings_;
  StreamMemory memory_;
  StepPlan plan_;
  StepResult result_;
  std::vector<Stream*> round_streams_;  // the stream of each logit row of plan_
  std::vector<Window> windows_;         // a round's streams, in row order
  std::vector<Filled> filled_;          // a fill step's chunks, in row order
  // State slots for the windows' per-row states. A stream whose drafts are rejected trades its
  // slot for the window slot holding its state after the last kept row, so the ids here and
  // in the stream slot pool change places as streams draft.
  std::vector<int32_t> window_slots_;
  DraftPlan draft_plan_;
  std::vector<Stream*> draft_streams_;  // the stream of each logit row of draft_plan_
  std::vector<std::vector<int32_t>> drafted_;

  // Shared with submitters: guarded by mutex_.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Stream>> incoming_;
  bool stopping_ = false;
  bool woken_ = false;
  uint64_t next_id_ = 1;
  LaneStats stats_;

  // Owned by the lane thread.
  std::deque<std::unique_ptr<Stream>> queued_;  // accepted, waiting for memory
  std::vector<std::unique_ptr<Stream>> active_; // admitted, in admission order
  bool last_was_fill_ = false;
  std::thread thread_;
  std::mutex stop_mutex_;
};

}  // namespace lockstep
