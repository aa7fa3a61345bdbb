// The memory a stream holds: KV pages (reserved at admission for every position the stream
// may reach, handed out as it grows) and a state slot for models with recurrent state.
// Plan, then commit: can_admit() and fits_ever() only look; admit() either reserves
// everything or nothing; grow() inside a reservation never fails, so a running stream is
// never starved or corrupted by a newcomer.
//
// Thread-safety: one thread changes it (the lane host's). fits_ever() reads only the pools'
// sizes, fixed at construction, so LaneHost::submit calls it from any thread; every other
// member is for the owning thread alone.
#pragma once

#include <cstdint>
#include <optional>

#include "memory/kv_pages.h"
#include "memory/state_slots.h"

namespace lockstep {

struct StreamMemoryHold {
  PageTable table;
  int32_t slot = -1;           // -1: the model keeps no recurrent state
  int32_t reserved_pages = 0;  // pages promised to this stream, held or not yet taken
};

class StreamMemory {
 public:
  // state_slots: 0 when the model keeps no recurrent state.
  StreamMemory(int32_t kv_pages, int32_t page_size, int32_t state_slots);

  // Could a stream reaching `length` positions be admitted now?
  bool can_admit(int64_t length) const;
  // Could it ever be, with every other stream gone?
  bool fits_ever(int64_t length) const;
  // Reserves pages for `length` positions and a slot; nullopt (nothing changed) if it can't.
  [[nodiscard]] std::optional<StreamMemoryHold> admit(int64_t length);
  // Gives `hold` pages to reach `length` positions, within its reservation.
  void grow(StreamMemoryHold& hold, int64_t length);
  // Returns the hold's pages, reservation and slot.
  void release(StreamMemoryHold& hold);

  int32_t free_pages() const { return pages_.free_pages(); }
  int32_t unreserved_pages() const { return pages_.page_count() - reserved_; }
  int32_t free_slots() const { return slots_.free_slots(); }
  const KvPagePool& pages() const { return pages_; }

 private:
  KvPagePool pages_;
  StateSlotPool slots_;
  bool keeps_state_;
  int32_t reserved_ = 0;  // pages promised to admitted streams
};

}  // namespace lockstep
