// The memory a stream holds: KV pages (reserved at admission for every position the stream
// may reach, handed out as it grows) and a state slot for models with recurrent state.
// Plan, then commit: can_admit() and fits_ever() only look; admit() either reserves
// everything or nothing; grow() inside a reservation never fails, so a running stream is
// never starved or corrupted by a newcomer.
//
// With the prompt cache on, a stream may start with pages the cache holds (a cached prefix of
// its prompt), shared with other streams and never written again. The cache lives in the
// pages no stream has reserved: grow() evicts cached pages when no page is free, and admission
// counts them as room, so cached data never keeps a stream out. A cached prefix whose last
// blocks were evicted to host memory is restored at admission into pages of the stream's own.
//
// Thread-safety: one thread changes it (the lane host's). fits_ever() reads only the pools'
// sizes, fixed at construction, so LaneHost::submit calls it from any thread; every other
// member is for the owning thread alone.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "memory/kv_pages.h"
#include "memory/prefix_cache.h"
#include "memory/state_slots.h"

namespace lockstep {

struct StreamMemoryHold {
  PageTable table;
  int32_t slot = -1;           // -1: the model keeps no recurrent state
  int32_t reserved_pages = 0;  // pages of its own promised to this stream, taken or not
  int32_t shared_pages = 0;    // the first pages of `table`, from the prompt cache
};

struct StreamMemorySettings {
  int32_t kv_pages = 0;
  int32_t page_size = 16;
  int32_t state_slots = 0;       // streams' slots (0: the model keeps no recurrent state)
  bool prompt_cache = false;
  size_t host_bytes = 0;         // the prompt cache's host memory: snapshots and evicted pages
  PageCopies page_copies;        // how pages go to host memory and back (none: dropped)
  StateCopies state_copies;      // how snapshots are taken and restored, and the cache's slots
};

class StreamMemory {
 public:
  explicit StreamMemory(const StreamMemorySettings& settings);
  // No cache: kv_pages, page_size, state_slots.
  StreamMemory(int32_t kv_pages, int32_t page_size, int32_t state_slots);

  // Could a stream reaching `length` positions, starting from `cached` (a lookup's match), be
  // admitted now?
  bool can_admit(int64_t length, const PrefixCache::Match* cached = nullptr) const;
  // Could it ever be, with every other stream gone?
  bool fits_ever(int64_t length) const;
  // Reserves pages for `length` positions and a slot; nullopt (nothing changed) if it can't.
  // `cached`: the stream's table starts with its device pages, held for as long as it runs,
  // then its host blocks, copied into pages of the stream's reservation.
  [[nodiscard]] std::optional<StreamMemoryHold> admit(int64_t length, const PrefixCache::Match* cached = nullptr);
  // Gives `hold` pages to reach `length` positions, within its reservation.
  void grow(StreamMemoryHold& hold, int64_t length);
  // A hold that has taken no page of its own yet starts with `cached` instead of its shorter
  // cached prefix: `cached.pages` must begin with the hold's table. The extra pages come out of
  // its reservation, so this never needs more room. False, changing nothing, otherwise.
  bool extend_shared(StreamMemoryHold& hold, int64_t length, const PrefixCache::Match& cached);
  // Returns the hold's pages, reservation and slot.
  void release(StreamMemoryHold& hold);

  // The prompt cache, or null when it is off.
  PrefixCache* cache() { return cache_.get(); }
  const PrefixCache* cache() const { return cache_.get(); }

  int32_t free_pages() const { return pages_.free_pages(); }
  // Pages no stream holds or has been promised (free, or held only by the cache).
  int32_t unreserved_pages() const { return pages_.page_count() - streams_hold_ - promised_; }
  int32_t free_slots() const { return slots_.free_slots(); }
  const KvPagePool& pages() const { return pages_; }

 private:
  // How many streams hold `page`.
  int32_t stream_holders(int32_t page) const;
  // Copies `cached`'s host blocks into the hold's next pages.
  void restore(StreamMemoryHold& hold, const PrefixCache::Match& cached);

  KvPagePool pages_;
  StateSlotPool slots_;
  std::unique_ptr<PrefixCache> cache_;  // after pages_: goes first
  bool keeps_state_;
  int32_t streams_hold_ = 0;  // pages at least one stream holds
  int32_t promised_ = 0;      // pages promised to streams and not yet taken
};

}  // namespace lockstep
