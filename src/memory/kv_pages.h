// The KV page pool: which pages of the paged attention cache each sequence holds. Host
// bookkeeping only; the cache memory itself belongs to the model. Plan, then commit:
// pages_to_grow() only looks, grow() either takes every page it needs or changes nothing.
//
// A page may be held more than once: by each stream whose prompt starts with the positions it
// holds, and by the prompt cache (memory/prefix_cache.h). It is free again when the last
// holder lets go.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace lockstep {

// One sequence's pages, in position order: position p lives in pages[p / page_size].
struct PageTable {
  std::vector<int32_t> pages;
};

class KvPagePool {
 public:
  KvPagePool(int32_t page_count, int32_t page_size);

  int32_t page_size() const { return page_size_; }
  int32_t page_count() const { return page_count_; }
  int32_t free_pages() const { return int32_t(free_.size()); }

  // Pages needed to hold positions 0..length-1.
  int32_t pages_for(int64_t length) const { return int32_t((length + page_size_ - 1) / page_size_); }
  // Pages `table` must gain to hold `length` positions. No side effects.
  int32_t pages_to_grow(const PageTable& table, int64_t length) const;
  // Grows `table` to hold `length` positions. Returns false, changing nothing, when the pool
  // has too few free pages.
  [[nodiscard]] bool grow(PageTable& table, int64_t length);
  // Lets go of every page of `table` (release()) and empties it.
  void release(PageTable& table);

  // A free page, held once; nullopt when none is free. The lowest ids are handed out first.
  [[nodiscard]] std::optional<int32_t> take();
  // One more holder of a held page.
  void retain(int32_t page);
  // One holder fewer; returns true when that freed the page.
  bool release(int32_t page);
  // How many hold `page` (0: free).
  int32_t holders(int32_t page) const { return holders_[size_t(page)]; }

 private:
  int32_t page_count_;
  int32_t page_size_;
  std::vector<int32_t> free_;     // a stack: the lowest ids are handed out first
  std::vector<int32_t> holders_;  // by page
};

}  // namespace lockstep
