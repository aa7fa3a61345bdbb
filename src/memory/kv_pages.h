// The KV page pool: which pages of the paged attention cache each sequence holds. Host
// bookkeeping only; the cache memory itself belongs to the model. Plan, then commit:
// pages_to_grow() only looks, grow() either takes every page it needs or changes nothing.
#pragma once

#include <cstdint>
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
  // Returns every page of `table` to the pool and empties it.
  void release(PageTable& table);

 private:
  int32_t page_count_;
  int32_t page_size_;
  std::vector<int32_t> free_;  // a stack: the lowest ids are handed out first
};

}  // namespace lockstep
