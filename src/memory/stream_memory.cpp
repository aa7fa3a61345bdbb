#include "memory/stream_memory.h"

#include <algorithm>
#include <cassert>

namespace lockstep {

StreamMemory::StreamMemory(const StreamMemorySettings& settings)
    : pages_(settings.kv_pages, settings.page_size),
      slots_(settings.state_slots),
      keeps_state_(settings.state_slots > 0) {
  if (settings.prompt_cache) cache_ = std::make_unique<PrefixCache>(pages_, settings.host_bytes, settings.page_copies, settings.state_copies);
}

StreamMemory::StreamMemory(int32_t kv_pages, int32_t page_size, int32_t state_slots)
    : StreamMemory(StreamMemorySettings{kv_pages, page_size, state_slots, false, 0, {}, {}}) {}

int32_t StreamMemory::stream_holders(int32_t page) const {
  return pages_.holders(page) - (cache_ && cache_->holds(page) ? 1 : 0);
}

bool StreamMemory::can_admit(int64_t length, const PrefixCache::Match* cached) const {
  int32_t shared = 0, newly_held = 0;
  if (cached) {
    shared = int32_t(cached->pages.size());
    for (int32_t page : cached->pages) newly_held += stream_holders(page) == 0;
  }
  const int32_t own = std::max(0, pages_.pages_for(length) - shared);
  return own + newly_held <= unreserved_pages() && (!keeps_state_ || slots_.free_slots() > 0);
}

bool StreamMemory::fits_ever(int64_t length) const {
  return pages_.pages_for(length) <= pages_.page_count() && (!keeps_state_ || slots_.slot_count() > 0);
}

std::optional<StreamMemoryHold> StreamMemory::admit(int64_t length, const PrefixCache::Match* cached) {
  if (!can_admit(length, cached)) return std::nullopt;
  StreamMemoryHold hold;
  if (cached) {
    for (int32_t page : cached->pages) {
      streams_hold_ += stream_holders(page) == 0;
      pages_.retain(page);
      hold.table.pages.push_back(page);
    }
    hold.shared_pages = int32_t(cached->pages.size());
  }
  hold.reserved_pages = std::max(0, pages_.pages_for(length) - hold.shared_pages);
  if (keeps_state_) hold.slot = *slots_.acquire();
  promised_ += hold.reserved_pages;
  if (cached) restore(hold, *cached);
  return hold;
}

void StreamMemory::restore(StreamMemoryHold& hold, const PrefixCache::Match& cached) {
  if (cached.host_blocks.empty()) return;
  // Taking a page may evict another to the host, which must not push these blocks out.
  cache_->pin(cached, true);
  for (int32_t block : cached.host_blocks) {
    grow(hold, int64_t(hold.table.pages.size() + 1) * pages_.page_size());
    cache_->restore(block, hold.table.pages.back());
  }
  cache_->pin(cached, false);
}

void StreamMemory::grow(StreamMemoryHold& hold, int64_t length) {
  assert(pages_.pages_for(length) <= hold.shared_pages + hold.reserved_pages);
  while (int64_t(hold.table.pages.size()) < pages_.pages_for(length)) {
    std::optional<int32_t> page = pages_.take();
    // The pages no stream holds or was promised cover every promise: if none is free, one only
    // the cache holds can go.
    if (!page && cache_ && cache_->evict_page()) page = pages_.take();
    assert(page && "a reservation always has its pages");
    hold.table.pages.push_back(*page);
    --promised_;
    ++streams_hold_;
  }
}

bool StreamMemory::extend_shared(StreamMemoryHold& hold, int64_t length, const PrefixCache::Match& cached) {
  const size_t shared = size_t(hold.shared_pages);
  if (hold.table.pages.size() != shared || cached.pages.size() < shared ||
      cached.pages.size() + cached.host_blocks.size() <= shared ||
      !std::equal(hold.table.pages.begin(), hold.table.pages.end(), cached.pages.begin()))
    return false;
  for (size_t i = shared; i < cached.pages.size(); ++i) {
    const int32_t page = cached.pages[i];
    streams_hold_ += stream_holders(page) == 0;
    pages_.retain(page);
    hold.table.pages.push_back(page);
  }
  hold.shared_pages = int32_t(cached.pages.size());
  const int32_t reserved = std::max(0, pages_.pages_for(length) - hold.shared_pages);
  promised_ -= hold.reserved_pages - reserved;
  hold.reserved_pages = reserved;
  restore(hold, cached);
  return true;
}

void StreamMemory::release(StreamMemoryHold& hold) {
  const int32_t own_taken = int32_t(hold.table.pages.size()) - hold.shared_pages;
  promised_ -= hold.reserved_pages - own_taken;
  for (auto it = hold.table.pages.rbegin(); it != hold.table.pages.rend(); ++it) {
    const int32_t page = *it;
    streams_hold_ -= stream_holders(page) == 1;
    pages_.release(page);
    if (cache_) cache_->on_stream_release(page);
  }
  hold.table.pages.clear();
  hold.reserved_pages = 0;
  hold.shared_pages = 0;
  if (hold.slot >= 0) slots_.release(hold.slot);
  hold.slot = -1;
}

}  // namespace lockstep
