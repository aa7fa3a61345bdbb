// The prompt cache's index: what earlier prompts (and replies) left in the KV pages, so that a
// prompt starting the same way skips filling that part.
//
// Blocks of page_size token ids form a tree: a block's parent is the block before it, so a path
// from the root spells a prefix, and each block names the KV page that holds its positions. The
// same ids may be cached twice, from two streams that filled them at once; a lookup takes the
// copy that leads furthest.
// Matching compares the ids themselves (the hash only finds candidates), so a hit is never a
// collision. A block may also carry a snapshot: the recurrent state after its last position,
// which models with such state need to resume there.
//
// Memory: the cache holds each of its pages once in the KvPagePool. A page only the cache
// holds, at a leaf, can be evicted (least recently used first) whenever a stream needs a page:
// the cache lives in the pages no stream has reserved. Snapshots live in host memory, at most
// `snapshot_bytes_limit` bytes (least recently used out first).
//
// One thread (the lane host's) uses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <queue>
#include <span>
#include <unordered_map>
#include <vector>

#include "memory/kv_pages.h"

namespace lockstep {

using StateSnapshot = std::vector<std::byte>;

struct PrefixCacheStats {
  int32_t pages = 0;              // pages the cache holds (some also held by streams)
  int64_t snapshots = 0;
  int64_t snapshot_bytes = 0;
  uint64_t evicted_pages = 0, evicted_snapshots = 0;
};

class PrefixCache {
 public:
  PrefixCache(KvPagePool& pages, size_t snapshot_bytes_limit);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  struct Match {
    int64_t tokens = 0;                        // positions [0, tokens) are cached
    std::vector<int32_t> pages;                // their pages, in order
    const StateSnapshot* snapshot = nullptr;   // with need_snapshot: the state after `tokens`
  };
  // The longest cached prefix of tokens[0, limit), in whole blocks. need_snapshot: only as far
  // as the deepest block with a snapshot (nothing if none). Marks what it returns as used.
  Match lookup(std::span<const int32_t> tokens, int64_t limit, bool need_snapshot);

  // Caches the whole blocks of tokens[0, length), whose KV is in table's pages. A block cached
  // with the same page is kept; the same ids cached with another page (another stream filled
  // them too) stay, and this copy is cached beside them, so that every cached path is one
  // stream's pages: a block's parent is always held by the streams that hold it. `snapshot`,
  // when given, is the state after `length` positions (a multiple of the page size).
  void insert(std::span<const int32_t> tokens, const PageTable& table, int64_t length,
              std::unique_ptr<StateSnapshot> snapshot = nullptr);

  // Whether the cache holds `page`.
  bool holds(int32_t page) const { return page_node_[size_t(page)] >= 0; }
  // A stream let go of `page`: if now only the cache holds it, it may be evicted.
  void on_stream_release(int32_t page);
  // Frees the least recently used page that only the cache holds, at a leaf. False if none.
  bool evict_page();
  // Evicts everything it can (pages no stream holds, every snapshot).
  void clear();

  PrefixCacheStats stats() const;

 private:
  struct Node {
    int32_t parent = -1;  // -1: the block at position 0
    int32_t page = -1;    // -1: the node is free
    int32_t children = 0;
    uint64_t used = 0;    // when a lookup or insert last touched it
    uint64_t key = 0;
    std::vector<int32_t> tokens;
    std::unique_ptr<StateSnapshot> snapshot;
  };
  struct Candidate {  // a leaf that may be evictable, as of `used`
    uint64_t used;
    int32_t node;
    bool operator>(const Candidate& other) const { return used > other.used; }
  };

  static uint64_t key_of(int32_t parent, std::span<const int32_t> block);
  // The copy of `block` after `parent` that holds `page`, or -1.
  int32_t find(int32_t parent, std::span<const int32_t> block, int32_t page) const;
  int32_t add(int32_t parent, std::span<const int32_t> block, int32_t page);
  void touch(int32_t node);
  bool evictable(int32_t node) const;
  void remove(int32_t node);
  void drop_snapshot(Node& node);
  void make_room_for_snapshot(size_t bytes);

  KvPagePool& pages_;
  const int32_t page_size_;
  const size_t snapshot_bytes_limit_;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_nodes_;
  std::unordered_multimap<uint64_t, int32_t> index_;  // key_of(parent, block) -> node
  std::vector<int32_t> page_node_;                    // by page: its node, or -1
  std::vector<int32_t> snapshot_nodes_;               // the nodes with a snapshot
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> leaves_;
  uint64_t clock_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace lockstep
