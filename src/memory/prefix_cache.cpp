#include "memory/prefix_cache.h"

#include <algorithm>
#include <cassert>

namespace lockstep {

PrefixCache::PrefixCache(KvPagePool& pages, size_t host_bytes_limit, PageCopies page_copies,
                         StateCopies state_copies)
    : pages_(pages),
      page_size_(pages.page_size()),
      host_bytes_limit_(host_bytes_limit),
      page_copies_(std::move(page_copies)),
      state_copies_(std::move(state_copies)),
      free_snapshot_slots_(state_copies_.slots.rbegin(), state_copies_.slots.rend()),
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
    if ((!need_snapshot || nodes_[size_t(node)].has_snapshot()) && path.size() > best_path.size()) best_path = path;
    push_children(node, path.size());
  }
  Match match;
  match.tokens = int64_t(best_path.size()) * page_size_;
  for (int32_t node : best_path) {
    const int32_t page = nodes_[size_t(node)].page;
    assert((page >= 0) == match.host_blocks.empty() && "device blocks come first");
    if (page >= 0)
      match.pages.push_back(page);
    else
      match.host_blocks.push_back(node);
  }
  touch_path(best_path);
  if (need_snapshot && !best_path.empty()) match.snapshot_block = best_path.back();
  return match;
}

void PrefixCache::insert(std::span<const int32_t> tokens, const PageTable& table, int64_t length,
                         int32_t state_slot) {
  const int64_t blocks = std::min<int64_t>({length / page_size_, int64_t(table.pages.size()),
                                            int64_t(tokens.size()) / page_size_});
  std::vector<int32_t> path;
  int32_t parent = -1;
  for (int64_t i = 0; i < blocks; ++i) {
    std::span<const int32_t> block = tokens.subspan(size_t(i * page_size_), size_t(page_size_));
    // The stream's own copy of the block: the one with its page. Another stream's copy of the
    // same ids may hold other bits (a model with state computes a block with its whole chunk),
    // and a path never runs through a copy its stream did not read: a second copy is cached
    // beside the first.
    int32_t node = find(parent, block, table.pages[size_t(i)]);
    if (node < 0) node = add(parent, block, table.pages[size_t(i)]);
    path.push_back(node);
    parent = node;
  }
  touch_path(path);
  if (state_slot < 0 || parent < 0 || blocks * page_size_ != length || nodes_[size_t(parent)].has_snapshot()) return;
  // On the device if a slot is free or can be freed, else on the host if there is room.
  nodes_[size_t(parent)].pinned = true;  // freeing room must not take the node itself
  const int32_t slot = take_snapshot_slot();
  if (slot >= 0) {
    state_copies_.copy(state_slot, slot);
    nodes_[size_t(parent)].snapshot_slot = slot;
    ++stats_.device_snapshots;
  } else if (make_host_room(state_copies_.bytes)) {
    save_snapshot_to_host(parent, state_slot);
  }
  set_pinned(parent, false);
  stats_.snapshots += nodes_[size_t(parent)].has_snapshot();
}

int32_t PrefixCache::take_snapshot_slot() {
  if (!free_snapshot_slots_.empty()) {
    const int32_t slot = free_snapshot_slots_.back();
    free_snapshot_slots_.pop_back();
    return slot;
  }
  // Every slot holds a snapshot: the least recently used one moves to the host (or goes).
  int32_t oldest = -1;
  for (size_t id = 0; id < nodes_.size(); ++id) {
    const Node& node = nodes_[id];
    if (node.live && node.snapshot_slot >= 0 && !node.pinned && (oldest < 0 || node.used < nodes_[size_t(oldest)].used))
      oldest = int32_t(id);
  }
  if (oldest < 0) return -1;
  Node& node = nodes_[size_t(oldest)];
  const int32_t slot = node.snapshot_slot;
  node.pinned = true;
  if (make_host_room(state_copies_.bytes)) {
    save_snapshot_to_host(oldest, slot);
  } else {
    --stats_.snapshots;
    ++stats_.evicted_snapshots;
  }
  node.snapshot_slot = -1;
  --stats_.device_snapshots;
  set_pinned(oldest, false);
  return slot;
}

void PrefixCache::save_snapshot_to_host(int32_t id, int32_t slot) {
  Node& node = nodes_[size_t(id)];
  node.snapshot = std::make_unique<StateSnapshot>(state_copies_.bytes);
  state_copies_.save(slot, node.snapshot->data());
  stats_.host_bytes += int64_t(state_copies_.bytes);
  host_items_.push({node.used, id});
}

void PrefixCache::load_snapshot(const Match& match, int32_t slot) {
  const Node& node = nodes_[size_t(match.snapshot_block)];
  assert(node.has_snapshot());
  if (node.snapshot_slot >= 0)
    state_copies_.copy(node.snapshot_slot, slot);
  else
    state_copies_.load(node.snapshot->data(), slot);
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
  assert(!node.has_snapshot() && node.host.empty() && "a freed node holds nothing");
  node.live = true;
  node.pinned = false;
  node.parent = parent;
  node.page = page;
  node.device_children = 0;
  node.children.clear();
  node.key = key_of(parent, block);
  node.tokens.assign(block.begin(), block.end());
  index_.emplace(node.key, id);
  pages_.retain(page);
  page_node_[size_t(page)] = id;
  if (parent >= 0) {
    nodes_[size_t(parent)].children.push_back(id);
    ++nodes_[size_t(parent)].device_children;
  }
  ++stats_.pages;
  return id;
}

void PrefixCache::touch_path(std::span<const int32_t> path) {
  for (auto it = path.rbegin(); it != path.rend(); ++it) touch(*it);
}

void PrefixCache::touch(int32_t id) {
  Node& node = nodes_[size_t(id)];
  node.used = ++clock_;
  if (evictable(id)) leaves_.push({node.used, id});
  if (holds_host_memory(id)) host_items_.push({node.used, id});
  // Entries go stale as nodes are used again; without pressure nothing pops them, so the queues
  // are rebuilt from the nodes when they outgrow them.
  const size_t bound = 2 * nodes_.size() + 1024;
  if (leaves_.size() > bound || host_items_.size() > bound) rebuild_queues();
}

void PrefixCache::rebuild_queues() {
  leaves_ = {};
  host_items_ = {};
  for (size_t id = 0; id < nodes_.size(); ++id) {
    if (evictable(int32_t(id))) leaves_.push({nodes_[id].used, int32_t(id)});
    if (holds_host_memory(int32_t(id))) host_items_.push({nodes_[id].used, int32_t(id)});
  }
}

bool PrefixCache::evictable(int32_t id) const {
  const Node& node = nodes_[size_t(id)];
  return node.live && node.page >= 0 && node.device_children == 0 && pages_.holders(node.page) == 1;
}

bool PrefixCache::holds_host_memory(int32_t id) const {
  const Node& node = nodes_[size_t(id)];
  return node.live && (node.snapshot != nullptr || node.page < 0);
}

void PrefixCache::on_stream_release(int32_t page) {
  const int32_t id = page_node_[size_t(page)];
  if (id >= 0 && evictable(id)) leaves_.push({nodes_[size_t(id)].used, id});
}

bool PrefixCache::evict_page() { return evict(true); }

bool PrefixCache::evict(bool keep_on_host) {
  while (!leaves_.empty()) {
    const Candidate candidate = leaves_.top();
    leaves_.pop();
    // Entries go stale when their node is used again, gains a child or a stream, or goes.
    if (candidate.used != nodes_[size_t(candidate.node)].used || !evictable(candidate.node)) continue;
    if (keep_on_host && page_copies_.bytes > 0 && make_host_room(page_copies_.bytes))
      spill(candidate.node);
    else
      remove_from(candidate.node);
    return true;
  }
  return false;
}

void PrefixCache::spill(int32_t id) {
  Node& node = nodes_[size_t(id)];
  node.host.resize(page_copies_.bytes);
  page_copies_.save(node.page, node.host.data());
  page_node_[size_t(node.page)] = -1;
  pages_.release(node.page);
  node.page = -1;
  --stats_.pages;
  ++stats_.host_pages;
  ++stats_.spilled_pages;
  stats_.host_bytes += int64_t(page_copies_.bytes);
  host_items_.push({node.used, id});
  if (node.parent >= 0) {
    --nodes_[size_t(node.parent)].device_children;
    if (evictable(node.parent)) leaves_.push({nodes_[size_t(node.parent)].used, node.parent});
  }
}

void PrefixCache::pin(const Match& match, bool pinned) {
  for (int32_t id : match.host_blocks) set_pinned(id, pinned);
  if (match.snapshot_block >= 0) set_pinned(match.snapshot_block, pinned);
}

void PrefixCache::set_pinned(int32_t id, bool pinned) {
  Node& node = nodes_[size_t(id)];
  node.pinned = pinned;
  // make_host_room drops the queue entries of pinned nodes: they come back here.
  if (!pinned && holds_host_memory(id)) host_items_.push({node.used, id});
}

bool PrefixCache::holds_pinned(int32_t id) const {
  std::vector<int32_t> todo{id};
  while (!todo.empty()) {
    const Node& node = nodes_[size_t(todo.back())];
    todo.pop_back();
    if (node.pinned) return true;
    todo.insert(todo.end(), node.children.begin(), node.children.end());
  }
  return false;
}

void PrefixCache::restore(int32_t id, int32_t page) {
  Node& node = nodes_[size_t(id)];
  assert(node.live && node.page < 0 && page_node_[size_t(page)] < 0);
  page_copies_.load(node.host.data(), page);
  stats_.host_bytes -= int64_t(node.host.size());
  node.host = {};
  node.page = page;
  pages_.retain(page);
  page_node_[size_t(page)] = id;
  if (node.parent >= 0) ++nodes_[size_t(node.parent)].device_children;
  ++stats_.pages;
  --stats_.host_pages;
  ++stats_.restored_pages;
  touch(id);
}

void PrefixCache::remove_from(int32_t id) {
  // The nodes after it are host nodes: a device node's parent is on the device.
  std::vector<int32_t> order{id};
  for (size_t i = 0; i < order.size(); ++i)
    for (int32_t child : nodes_[size_t(order[i])].children) order.push_back(child);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    remove(*it);
    ++stats_.evicted_pages;
  }
}

void PrefixCache::remove(int32_t id) {
  Node& node = nodes_[size_t(id)];
  assert(node.children.empty());
  drop_snapshot(node);
  auto [begin, end] = index_.equal_range(node.key);
  for (auto it = begin; it != end; ++it)
    if (it->second == id) {
      index_.erase(it);
      break;
    }
  const bool on_device = node.page >= 0;
  if (on_device) {
    page_node_[size_t(node.page)] = -1;
    pages_.release(node.page);
    --stats_.pages;
  } else {
    stats_.host_bytes -= int64_t(node.host.size());
    node.host = {};
    --stats_.host_pages;
  }
  node.live = false;
  node.page = -1;
  node.tokens.clear();
  free_nodes_.push_back(id);
  if (node.parent >= 0) {
    Node& parent = nodes_[size_t(node.parent)];
    parent.children.erase(std::find(parent.children.begin(), parent.children.end(), id));
    if (on_device) --parent.device_children;
    if (evictable(node.parent)) leaves_.push({parent.used, node.parent});
  }
}

void PrefixCache::drop_snapshot(Node& node) {
  if (!node.has_snapshot()) return;
  if (node.snapshot) stats_.host_bytes -= int64_t(node.snapshot->size());
  node.snapshot.reset();
  if (node.snapshot_slot >= 0) {
    free_snapshot_slots_.push_back(node.snapshot_slot);
    node.snapshot_slot = -1;
    --stats_.device_snapshots;
  }
  --stats_.snapshots;
}

bool PrefixCache::make_host_room(size_t bytes) {
  if (bytes > host_bytes_limit_) return false;
  // Blocks before a pinned block stay, and stay queued.
  std::vector<Candidate> skipped;
  struct Requeue {
    Queue& queue;
    std::vector<Candidate>& skipped;
    ~Requeue() {
      for (const Candidate& candidate : skipped) queue.push(candidate);
    }
  } requeue{host_items_, skipped};
  while (size_t(stats_.host_bytes) + bytes > host_bytes_limit_) {
    if (host_items_.empty()) return false;
    const Candidate candidate = host_items_.top();
    host_items_.pop();
    Node& node = nodes_[size_t(candidate.node)];
    // Pinned nodes drop out of the queue; restore() and unpinning touch them again.
    if (candidate.used != node.used || !holds_host_memory(candidate.node) || node.pinned) continue;
    if (node.page < 0) {
      // Dropping a host block drops the blocks after it: never a pinned one.
      if (holds_pinned(candidate.node)) {
        skipped.push_back(candidate);
        continue;
      }
      remove_from(candidate.node);
    } else {
      stats_.host_bytes -= int64_t(node.snapshot->size());
      node.snapshot.reset();
      --stats_.snapshots;
      ++stats_.evicted_snapshots;
    }
  }
  return true;
}

void PrefixCache::clear() {
  for (size_t id = 0; id < nodes_.size(); ++id) {
    const Node& node = nodes_[id];
    if (node.live && node.page < 0 && (node.parent < 0 || nodes_[size_t(node.parent)].page >= 0))
      remove_from(int32_t(id));
  }
  for (Node& node : nodes_)
    if (node.live) drop_snapshot(node);
  while (evict(false)) {
  }
}

PrefixCacheStats PrefixCache::stats() const { return stats_; }

}  // namespace lockstep
