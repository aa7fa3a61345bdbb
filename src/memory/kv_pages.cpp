#include "memory/kv_pages.h"

#include <algorithm>

namespace lockstep {

KvPagePool::KvPagePool(int32_t page_count, int32_t page_size) : page_count_(page_count), page_size_(page_size) {
  free_.reserve(size_t(page_count));
  for (int32_t id = page_count - 1; id >= 0; --id) free_.push_back(id);
}

int32_t KvPagePool::pages_to_grow(const PageTable& table, int64_t length) const {
  return std::max<int32_t>(0, pages_for(length) - int32_t(table.pages.size()));
}

bool KvPagePool::grow(PageTable& table, int64_t length) {
  int32_t needed = pages_to_grow(table, length);
  if (needed > free_pages()) return false;
  for (int32_t i = 0; i < needed; ++i) {
    table.pages.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void KvPagePool::release(PageTable& table) {
  for (auto it = table.pages.rbegin(); it != table.pages.rend(); ++it) free_.push_back(*it);
  table.pages.clear();
}

}  // namespace lockstep
