#include "memory/prefix_cache.h"

#include <algorithm>

namespace lockstep {

PrefixCache::PrefixCache(KvPagePool& pages, size_t snapshot_bytes_limit)
    : pages_(pages),
      page_size_(pages.page_size()),
      snapshot_bytes_limit_(snapshot_bytes_limit),
      page_node_(size_t(std::max(pages.page_count(), 0)), -1) {}

PrefixCache::~PrefixCache() = default;

uint64_t PrefixCache::key_of(int32_t parent, std::span<const int32_t> block) {
  uint64_t key = 0x9E3779B97F4A7C15ull ^ uint64_t(uint32_t(parent));
  for (int32_t id : block) {
    key ^= uint64_t(uint32_t(id)) + 0x9E3779B97F4A7C15ull + (key << 6) + (key >> 2);
    key *= 0xBF58476D1CE4E5B9ull;
  }
  return key;
}

int32_t PrefixCache::find(int32_t parent, std::span<const int32_t> block, int32_t page) const {
  auto [begin, end] = index_.equal_range(key_of(parent, block));
  for (auto it = begin; it != end; ++it) {
    const Node& node = nodes_[size_t(it->second)];
    if (node.parent == parent && node.page == page &&
        std::equal(block.begin(), block.end(), node.tokens.begin(), node.tokens.end()))
      return it->second;
  }
  return -1;
}

PrefixCache::Match PrefixCache::lookup(std::span<const int32_t> tokens, int64_t limit, bool need_snapshot) {
  // Depth first: the same blocks may be cached more than once (streams that filled them at the
  // same time), each copy with what its stream cached after it; the deepest usable end wins.
  limit = std::min<int64_t>(limit, int64_t(tokens.size()));
  const size_t max_depth = size_t(std::max<int64_t>(limit / page_size_, 0));
  std::vector<int32_t> path, best_path;
  std::vector<std::pair<int32_t, size_t>> stack;  // (node, its depth: blocks before it)
  auto push_children = [&](int32_t parent, size_t depth) {
    if (depth >= max_depth) return;
    std::span<const int32_t> block = tokens.subspan(depth * size_t(page_size_), size_t(page_size_));
    auto [begin, end] = index_.equal_range(key_of(parent, block));
    for (auto it = begin; it != end; ++it) {
      const Node& node = nodes_[size_t(it->second)];
      if (node.parent == parent && std::equal(block.begin(), block.end(), node.tokens.begin(), node.tokens.end()))
        stack.push_back({it->second, depth});
    }
  };
  push_children(-1, 0);
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    path.resize(depth);
    path.push_back(node);
    if ((!need_snapshot || nodes_[size_t(node)].snapshot) && path.size() > best_path.size()) best_path = path;
    push_children(node, path.size());
  }
  Match match;
  match.tokens = int64_t(best_path.size()) * page_size_;
  for (int32_t node : best_path) {
    match.pages.push_back(nodes_[size_t(node)].page);
    touch(node);
  }
  if (need_snapshot && !best_path.empty()) match.snapshot = nodes_[size_t(best_path.back())].snapshot.get();
  return match;
}

void PrefixCache::insert(std::span<const int32_t> tokens, const PageTable& table, int64_t length,
                         std::unique_ptr<StateSnapshot> snapshot) {
  const int64_t blocks = std::min<int64_t>({length / page_size_, int64_t(table.pages.size()),
                                            int64_t(tokens.size()) / page_size_});
  int32_t parent = -1;
  for (int64_t i = 0; i < blocks; ++i) {
    std::span<const int32_t> block = tokens.subspan(size_t(i * page_size_), size_t(page_size_));
    // The stream's own copy of the block: the one with its page. Another stream's copy of the
    // same ids may hold other bits (a model with state computes a block with its whole chunk),
    // and a path never runs through a copy its stream did not read: a second copy is cached
    // beside the first.
    int32_t node = find(parent, block, table.pages[size_t(i)]);
    if (node < 0) node = add(parent, block, table.pages[size_t(i)]);
    touch(node);
    parent = node;
  }
  if (!snapshot || parent < 0 || blocks * page_size_ != length) return;
  Node& last = nodes_[size_t(parent)];
  if (last.snapshot || snapshot->size() > snapshot_bytes_limit_) return;
  make_room_for_snapshot(snapshot->size());
  stats_.snapshot_bytes += int64_t(snapshot->size());
  ++stats_.snapshots;
  last.snapshot = std::move(snapshot);
  snapshot_nodes_.push_back(parent);
}

int32_t PrefixCache::add(int32_t parent, std::span<const int32_t> block, int32_t page) {
  int32_t id;
  if (!free_nodes_.empty()) {
    id = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    id = int32_t(nodes_.size());
    nodes_.emplace_back();
  }
  Node& node = nodes_[size_t(id)];
  node.parent = parent;
  node.page = page;
  node.children = 0;
  node.key = key_of(parent, block);
  node.tokens.assign(block.begin(), block.end());
  index_.emplace(node.key, id);
  pages_.retain(page);
  page_node_[size_t(page)] = id;
  if (parent >= 0) ++nodes_[size_t(parent)].children;
  ++stats_.pages;
  return id;
}

void PrefixCache::touch(int32_t id) {
  Node& node = nodes_[size_t(id)];
  node.used = ++clock_;
  if (evictable(id)) leaves_.push({node.used, id});
}

bool PrefixCache::evictable(int32_t id) const {
  const Node& node = nodes_[size_t(id)];
  return node.page >= 0 && node.children == 0 && pages_.holders(node.page) == 1;
}

void PrefixCache::on_stream_release(int32_t page) {
  const int32_t id = page_node_[size_t(page)];
  if (id >= 0 && evictable(id)) leaves_.push({nodes_[size_t(id)].used, id});
}

bool PrefixCache::evict_page() {
  while (!leaves_.empty()) {
    const Candidate candidate = leaves_.top();
    leaves_.pop();
    // Entries go stale when their node is used again, gains a child or a stream, or goes.
    if (candidate.used != nodes_[size_t(candidate.node)].used || !evictable(candidate.node)) continue;
    remove(candidate.node);
    ++stats_.evicted_pages;
    return true;
  }
  return false;
}

void PrefixCache::remove(int32_t id) {
  Node& node = nodes_[size_t(id)];
  drop_snapshot(node);
  auto [begin, end] = index_.equal_range(node.key);
  for (auto it = begin; it != end; ++it)
    if (it->second == id) {
      index_.erase(it);
      break;
    }
  page_node_[size_t(node.page)] = -1;
  pages_.release(node.page);
  node.page = -1;
  node.tokens.clear();
  --stats_.pages;
  free_nodes_.push_back(id);
  if (node.parent >= 0) {
    Node& parent = nodes_[size_t(node.parent)];
    --parent.children;
    if (evictable(node.parent)) leaves_.push({parent.used, node.parent});
  }
}

void PrefixCache::drop_snapshot(Node& node) {
  if (!node.snapshot) return;
  stats_.snapshot_bytes -= int64_t(node.snapshot->size());
  --stats_.snapshots;
  node.snapshot.reset();
  const int32_t id = int32_t(&node - nodes_.data());
  snapshot_nodes_.erase(std::find(snapshot_nodes_.begin(), snapshot_nodes_.end(), id));
}

void PrefixCache::make_room_for_snapshot(size_t bytes) {
  while (!snapshot_nodes_.empty() && size_t(stats_.snapshot_bytes) + bytes > snapshot_bytes_limit_) {
    auto oldest = std::min_element(snapshot_nodes_.begin(), snapshot_nodes_.end(), [&](int32_t a, int32_t b) {
      return nodes_[size_t(a)].used < nodes_[size_t(b)].used;
    });
    drop_snapshot(nodes_[size_t(*oldest)]);
    ++stats_.evicted_snapshots;
  }
}

void PrefixCache::clear() {
  while (!snapshot_nodes_.empty()) drop_snapshot(nodes_[size_t(snapshot_nodes_.back())]);
  while (evict_page()) {
  }
}

PrefixCacheStats PrefixCache::stats() const { return stats_; }

}  // namespace lockstep
