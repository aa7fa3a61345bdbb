#include "memory/kv_pages.h"

#include <algorithm>
#include <cassert>

namespace lockstep {

KvPagePool::KvPagePool(int32_t page_count, int32_t page_size)
    : page_count_(page_count), page_size_(page_size), holders_(size_t(std::max(page_count, 0)), 0) {
  free_.reserve(size_t(std::max(page_count, 0)));
  for (int32_t id = page_count - 1; id >= 0; --id) free_.push_back(id);
}

int32_t KvPagePool::pages_to_grow(const PageTable& table, int64_t length) const {
  return std::max<int32_t>(0, pages_for(length) - int32_t(table.pages.size()));
}

bool KvPagePool::grow(PageTable& table, int64_t length) {
  int32_t needed = pages_to_grow(table, length);
  if (needed > free_pages()) return false;
  for (int32_t i = 0; i < needed; ++i) table.pages.push_back(*take());
  return true;
}

void KvPagePool::release(PageTable& table) {
  for (auto it = table.pages.rbegin(); it != table.pages.rend(); ++it) release(*it);
  table.pages.clear();
}

std::optional<int32_t> KvPagePool::take() {
  if (free_.empty()) return std::nullopt;
  const int32_t page = free_.back();
  free_.pop_back();
  holders_[size_t(page)] = 1;
  return page;
}

void KvPagePool::retain(int32_t page) {
  assert(holders_[size_t(page)] > 0 && "only a held page gains holders");
  ++holders_[size_t(page)];
}

bool KvPagePool::release(int32_t page) {
  assert(holders_[size_t(page)] > 0 && "a page is let go of once per holder");
  if (--holders_[size_t(page)] > 0) return false;
  free_.push_back(page);
  return true;
}

}  // namespace lockstep
