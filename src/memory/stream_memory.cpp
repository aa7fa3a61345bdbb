#include "memory/stream_memory.h"

#include <cassert>

namespace lockstep {

StreamMemory::StreamMemory(int32_t kv_pages, int32_t page_size, int32_t state_slots)
    : pages_(kv_pages, page_size), slots_(state_slots), keeps_state_(state_slots > 0) {}

bool StreamMemory::can_admit(int64_t length) const {
  return pages_.pages_for(length) <= unreserved_pages() && (!keeps_state_ || slots_.free_slots() > 0);
}

bool StreamMemory::fits_ever(int64_t length) const {
  return pages_.pages_for(length) <= pages_.page_count() && (!keeps_state_ || slots_.slot_count() > 0);
}

std::optional<StreamMemoryHold> StreamMemory::admit(int64_t length) {
  if (!can_admit(length)) return std::nullopt;
  StreamMemoryHold hold;
  hold.reserved_pages = pages_.pages_for(length);
  if (keeps_state_) hold.slot = *slots_.acquire();
  reserved_ += hold.reserved_pages;
  return hold;
}

void StreamMemory::grow(StreamMemoryHold& hold, int64_t length) {
  assert(pages_.pages_for(length) <= hold.reserved_pages);
  bool grown = pages_.grow(hold.table, length);
  assert(grown && "a reservation always has its pages");
  (void)grown;
}

void StreamMemory::release(StreamMemoryHold& hold) {
  pages_.release(hold.table);
  reserved_ -= hold.reserved_pages;
  hold.reserved_pages = 0;
  if (hold.slot >= 0) slots_.release(hold.slot);
  hold.slot = -1;
}

}  // namespace lockstep
