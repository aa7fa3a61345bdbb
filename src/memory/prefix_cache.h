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
// Memory, two tiers:
// - Device: the cache holds each of its pages once in the KvPagePool. A page only the cache
//   holds, with no child block on the device, can be evicted (least recently used first)
//   whenever a stream needs a page: the cache lives in the pages no stream has reserved.
//   Snapshots go to state slots set aside for the cache (StateCopies::slots; no stream uses
//   them), copied slot to slot; when every one is taken the least recently used moves to host.
// - Host, at most `host_bytes_limit` bytes: snapshots, and the K and V of evicted pages (with
//   PageCopies), least recently used out first. A block kept on the host is still matched; the
//   stream that matches it takes a page of its own and restore() copies the block back. So a
//   path from the root is device blocks, then host blocks; dropping a host block drops the
//   blocks after it.
//
// One thread (the lane host's) uses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <span>
#include <unordered_map>
#include <vector>

#include "memory/kv_pages.h"

namespace lockstep {

using StateSnapshot = std::vector<std::byte>;

// How the cache keeps a page's K and V in host memory: the model's copies, in order with its
// passes. bytes == 0: evicted pages are dropped.
struct PageCopies {
  size_t bytes = 0;
  std::function<void(int32_t page, std::byte* dst)> save;
  std::function<void(const std::byte* src, int32_t page)> load;
};

// How the cache keeps a stream's recurrent state: the model's copies, in order with its passes.
struct StateCopies {
  size_t bytes = 0;                // one slot's state
  std::vector<int32_t> slots;      // state slots for the cache's own snapshots (none: host only)
  std::function<void(int32_t slot, std::byte* dst)> save;
  std::function<void(const std::byte* src, int32_t slot)> load;
  std::function<void(int32_t from, int32_t to)> copy;
};

struct PrefixCacheStats {
  int32_t pages = 0;              // device pages the cache holds (some also held by streams)
  int32_t host_pages = 0;         // blocks whose K and V are kept in host memory
  int64_t snapshots = 0;          // on the device and on the host
  int64_t device_snapshots = 0;   // in the cache's state slots
  int64_t host_bytes = 0;         // snapshots and host pages
  uint64_t evicted_pages = 0;     // blocks dropped from the cache, device or host
  uint64_t evicted_snapshots = 0;
  uint64_t spilled_pages = 0;     // device pages copied to the host to free them
  uint64_t restored_pages = 0;    // host blocks copied back into a stream's page
};

class PrefixCache {
 public:
  PrefixCache(KvPagePool& pages, size_t host_bytes_limit, PageCopies page_copies = {},
              StateCopies state_copies = {});
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  struct Match {
    int64_t tokens = 0;                        // positions [0, tokens) are cached
    std::vector<int32_t> pages;                // the device pages of the first blocks, in order
    std::vector<int32_t> host_blocks;          // then the blocks kept on the host, for restore()
    int32_t snapshot_block = -1;               // with need_snapshot: the block whose snapshot is
                                               // the state after `tokens` (load_snapshot())
  };
  // The longest cached prefix of tokens[0, limit), in whole blocks. need_snapshot: only as far
  // as the deepest block with a snapshot (nothing if none). Marks what it returns as used.
  Match lookup(std::span<const int32_t> tokens, int64_t limit, bool need_snapshot);

  // Caches the whole blocks of tokens[0, length), whose KV is in table's pages. A block cached
  // with the same page is kept; the same ids cached with another page (another stream filled
  // them too) stay, and this copy is cached beside them, so that every cached path is one
  // stream's pages: a block's parent is always held by the streams that hold it. `snapshot`,
  // `state_slot`, when given, holds the state after `length` positions (a multiple of the page
  // size): the cache keeps a snapshot of it.
  void insert(std::span<const int32_t> tokens, const PageTable& table, int64_t length, int32_t state_slot = -1);
  // Sets state slot `slot` to the snapshot of a lookup's match (which must have one).
  void load_snapshot(const Match& match, int32_t slot);

  // Restoring a match's host blocks: pin() keeps them and its snapshot while the stream takes
  // pages (which may evict); restore() copies a host block into `page` (a page of the stream's
  // own, after the blocks before it) and holds it there; unpin() when done.
  void pin(const Match& match, bool pinned);
  void restore(int32_t block, int32_t page);

  // Whether the cache holds `page`.
  bool holds(int32_t page) const { return page_node_[size_t(page)] >= 0; }
  // A stream let go of `page`: if now only the cache holds it, it may be evicted.
  void on_stream_release(int32_t page);
  // Frees the least recently used page that only the cache holds and no device block follows,
  // keeping its K and V on the host when there is room. False if none.
  bool evict_page();
  // Evicts everything it can (pages no stream holds, everything on the host).
  void clear();

  PrefixCacheStats stats() const;

 private:
  struct Node {
    bool live = false;
    bool pinned = false;
    int32_t parent = -1;  // -1: the block at position 0
    int32_t page = -1;    // -1: kept on the host, in `host`
    int32_t device_children = 0;
    std::vector<int32_t> children;
    uint64_t used = 0;    // when a lookup or insert last touched it or a block after it
    uint64_t key = 0;
    std::vector<int32_t> tokens;
    std::unique_ptr<StateSnapshot> snapshot;  // on the host
    int32_t snapshot_slot = -1;               // on the device
    std::vector<std::byte> host;
    bool has_snapshot() const { return snapshot || snapshot_slot >= 0; }
  };
  struct Candidate {  // a node that may be evictable (or hold host memory), as of `used`
    uint64_t used;
    int32_t node;
    bool operator>(const Candidate& other) const { return used > other.used; }
  };
  using Queue = std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>>;

  static uint64_t key_of(int32_t parent, std::span<const int32_t> block);
  // The copy of `block` after `parent` that holds `page`, or -1.
  int32_t find(int32_t parent, std::span<const int32_t> block, int32_t page) const;
  int32_t add(int32_t parent, std::span<const int32_t> block, int32_t page);
  // Marks a path used, its last node first, so that a node is always used later than the
  // nodes after it: the least recently used are leaves.
  void touch_path(std::span<const int32_t> path);
  void touch(int32_t node);
  void rebuild_queues();
  bool evictable(int32_t node) const;
  bool holds_host_memory(int32_t node) const;
  // Frees a device page as evict_page() does; keep_on_host: spill it when there is room.
  bool evict(bool keep_on_host);
  void spill(int32_t node);
  // Removes the node and every node after it.
  void remove_from(int32_t node);
  void remove(int32_t node);
  void drop_snapshot(Node& node);
  void set_pinned(int32_t node, bool pinned);
  // Whether the node or a node after it is pinned.
  bool holds_pinned(int32_t node) const;
  // A free state slot for a snapshot, moving the least recently used one to the host if none is;
  // -1 if every one is pinned.
  int32_t take_snapshot_slot();
  // Gives the node a host snapshot of state slot `slot` (room already made).
  void save_snapshot_to_host(int32_t node, int32_t slot);
  // Drops the least recently used host memory until `bytes` more fit; false if they can't.
  bool make_host_room(size_t bytes);

  KvPagePool& pages_;
  const int32_t page_size_;
  const size_t host_bytes_limit_;
  const PageCopies page_copies_;
  const StateCopies state_copies_;
  std::vector<int32_t> free_snapshot_slots_;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_nodes_;
  std::unordered_multimap<uint64_t, int32_t> index_;  // key_of(parent, block) -> node
  std::vector<int32_t> page_node_;                    // by page: its node, or -1
  Queue leaves_;      // device nodes that may be evictable
  Queue host_items_;  // nodes that may hold host memory (a snapshot or a host page)
  uint64_t clock_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace lockstep
