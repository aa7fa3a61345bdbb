// The prompt cache's index and its place in the stream memory: matching by the ids themselves,
// holding and freeing pages, least-recently-used eviction of pages and snapshots, and that
// cached data never keeps a stream out.
#include "memory/prefix_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "memory/stream_memory.h"

namespace lockstep {
namespace {

constexpr int32_t kPage = 4;

std::vector<int32_t> ids(int32_t first, int32_t count) {
  std::vector<int32_t> out(static_cast<size_t>(count));
  std::iota(out.begin(), out.end(), first);
  return out;
}

PageTable filled(KvPagePool& pool, int64_t length) {
  PageTable table;
  EXPECT_TRUE(pool.grow(table, length));
  return table;
}

// A stream lets go of its pages; the cache keeps those it cached.
void let_go(KvPagePool& pool, PrefixCache& cache, PageTable& table) {
  for (int32_t page : table.pages) {
    pool.release(page);
    cache.on_stream_release(page);
  }
}

TEST(PrefixCache, MatchesWholeBlocksOfTheSameIds) {
  KvPagePool pool(16, kPage);
  PrefixCache cache(pool, 0);
  const std::vector<int32_t> tokens = ids(100, 10);
  PageTable table = filled(pool, 10);
  cache.insert(tokens, table, 10);  // two whole blocks; the third is partial
  EXPECT_EQ(cache.stats().pages, 2);
  PrefixCache::Match match = cache.lookup(tokens, 10, false);
  EXPECT_EQ(match.tokens, 8);
  EXPECT_EQ(match.pages, (std::vector<int32_t>{table.pages[0], table.pages[1]}));
  EXPECT_EQ(cache.lookup(tokens, 7, false).tokens, 4);  // the limit cuts the match
  std::vector<int32_t> other = tokens;
  other[5] = 1;  // differs in the second block
  EXPECT_EQ(cache.lookup(other, 10, false).tokens, 4);
  other[0] = 1;
  EXPECT_EQ(cache.lookup(other, 10, false).tokens, 0);
  // The same block after another prefix is another block.
  std::vector<int32_t> shifted = ids(0, 4);
  shifted.insert(shifted.end(), tokens.begin() + 4, tokens.end());
  EXPECT_EQ(cache.lookup(shifted, 10, false).tokens, 0);
}

TEST(PrefixCache, HoldsItsPagesUntilEvictedLeastRecentlyUsedFirst) {
  KvPagePool pool(8, kPage);
  PrefixCache cache(pool, 0);
  PageTable a = filled(pool, 8), b = filled(pool, 8);
  cache.insert(ids(0, 8), a, 8);
  cache.insert(ids(50, 8), b, 8);
  for (PageTable* table : {&a, &b}) {  // the streams go; the cache keeps the pages
    for (int32_t page : table->pages) {
      pool.release(page);
      cache.on_stream_release(page);
    }
  }
  EXPECT_EQ(pool.free_pages(), 4);
  EXPECT_EQ(cache.lookup(ids(0, 9), 9, false).tokens, 8);  // a is used again: b is older
  // Leaves go first, so b's second block, then b's first.
  ASSERT_TRUE(cache.evict_page());
  EXPECT_EQ(cache.lookup(ids(50, 9), 9, false).tokens, 4);
  ASSERT_TRUE(cache.evict_page());
  ASSERT_TRUE(cache.evict_page());
  ASSERT_TRUE(cache.evict_page());
  EXPECT_FALSE(cache.evict_page());
  EXPECT_EQ(pool.free_pages(), 8);
  EXPECT_EQ(cache.stats().evicted_pages, 4u);
}

TEST(PrefixCache, NeverEvictsAPageAStreamHolds) {
  KvPagePool pool(4, kPage);
  PrefixCache cache(pool, 0);
  PageTable table = filled(pool, 8);
  cache.insert(ids(0, 8), table, 8);
  EXPECT_FALSE(cache.evict_page());
  pool.release(table.pages[1]);
  cache.on_stream_release(table.pages[1]);
  EXPECT_TRUE(cache.evict_page());   // the leaf, now only the cache's
  EXPECT_FALSE(cache.evict_page());  // its parent is still the stream's
}

// State slots for the tests: each slot's state is one int. Slot 0 is the stream's.
struct FakeStates {
  std::vector<int32_t> slots;
  explicit FakeStates(int32_t count) : slots(size_t(count), -1) {}
  StateCopies copies(std::vector<int32_t> cache_slots = {}) {
    StateCopies copies;
    copies.bytes = sizeof(int32_t);
    copies.slots = std::move(cache_slots);
    copies.save = [this](int32_t slot, std::byte* dst) { std::memcpy(dst, &slots[size_t(slot)], sizeof(int32_t)); };
    copies.load = [this](const std::byte* src, int32_t slot) { std::memcpy(&slots[size_t(slot)], src, sizeof(int32_t)); };
    copies.copy = [this](int32_t from, int32_t to) { slots[size_t(to)] = slots[size_t(from)]; };
    return copies;
  }
  // Caches tokens[0, length) with the stream's state `state` after it.
  void insert(PrefixCache& cache, const std::vector<int32_t>& tokens, const PageTable& table, int64_t length,
              int32_t state) {
    slots[0] = state;
    cache.insert(tokens, table, length, 0);
  }
  // The state a match's snapshot gives the stream's slot.
  int32_t restored(PrefixCache& cache, const PrefixCache::Match& match) {
    slots[0] = -1;
    cache.load_snapshot(match, 0);
    return slots[0];
  }
};

TEST(PrefixCache, SnapshotsLimitTheMatchAndStayWithinTheirBytes) {
  KvPagePool pool(16, kPage);
  FakeStates states(1);
  PrefixCache cache(pool, 2 * sizeof(int32_t), {}, states.copies());  // host room for two
  const std::vector<int32_t> tokens = ids(0, 16);
  PageTable table = filled(pool, 16);
  states.insert(cache, tokens, table, 8, 8);
  states.insert(cache, tokens, table, 16, 16);
  PrefixCache::Match match = cache.lookup(tokens, 16, true);
  EXPECT_EQ(match.tokens, 16);
  ASSERT_GE(match.snapshot_block, 0);
  EXPECT_EQ(states.restored(cache, match), 16);
  match = cache.lookup(tokens, 15, true);  // the deepest snapshot within the limit
  EXPECT_EQ(match.tokens, 8);
  EXPECT_EQ(states.restored(cache, match), 8);
  // A third snapshot passes the limit: the least recently used one (16's) goes.
  const std::vector<int32_t> other = ids(40, 8);
  PageTable other_table = filled(pool, 8);
  states.insert(cache, other, other_table, 8, 1);
  EXPECT_EQ(cache.stats().snapshots, 2);
  EXPECT_EQ(cache.stats().host_bytes, 8);
  EXPECT_EQ(cache.stats().evicted_snapshots, 1u);
  EXPECT_EQ(cache.lookup(tokens, 16, true).tokens, 8);
  // No room at all: not kept.
  PrefixCache none(pool, 3, {}, states.copies());
  states.insert(none, ids(60, 4), filled(pool, 4), 4, 2);
  EXPECT_EQ(none.stats().snapshots, 0);
  EXPECT_EQ(none.lookup(ids(60, 4), 4, true).tokens, 0);
}

TEST(PrefixCache, SnapshotsLiveInTheCachesSlotsThenMoveToTheHost) {
  KvPagePool pool(16, kPage);
  FakeStates states(3);
  PrefixCache cache(pool, sizeof(int32_t), {}, states.copies({1, 2}));  // two slots, host room for one
  std::vector<PageTable> tables;
  for (int32_t i = 0; i < 4; ++i) {
    tables.push_back(filled(pool, 4));
    states.insert(cache, ids(100 * i, 4), tables.back(), 4, 10 + i);
  }
  // The first two went to the slots; the third moved the first to the host; the fourth moved
  // the second there, which pushed the first out.
  const PrefixCacheStats stats = cache.stats();
  EXPECT_EQ(stats.snapshots, 3);
  EXPECT_EQ(stats.device_snapshots, 2);
  EXPECT_EQ(stats.host_bytes, 4);
  EXPECT_EQ(stats.evicted_snapshots, 1u);
  EXPECT_EQ(cache.lookup(ids(0, 4), 4, true).tokens, 0);
  for (int32_t i = 1; i < 4; ++i) {
    PrefixCache::Match match = cache.lookup(ids(100 * i, 4), 4, true);
    ASSERT_EQ(match.tokens, 4) << i;
    EXPECT_EQ(states.restored(cache, match), 10 + i);
  }
  // The cache's slots hold the last two; the stream's slot was never one of them.
  EXPECT_EQ(states.slots[1] + states.slots[2], 12 + 13);
  cache.clear();
  EXPECT_EQ(cache.stats().snapshots, 0);
  EXPECT_EQ(cache.stats().device_snapshots, 0);
  EXPECT_EQ(cache.stats().host_bytes, 0);
}

TEST(PrefixCache, TwoCopiesOfTheSameBlocksEachLeadToTheirOwnStreamsBlocks) {
  KvPagePool pool(16, kPage);
  FakeStates states(1);
  PrefixCache cache(pool, 100, {}, states.copies());
  // Two streams filled the same first two blocks at once, then went their own ways.
  std::vector<int32_t> a = ids(0, 16), b = ids(0, 16);
  for (size_t i = 8; i < 16; ++i) b[i] = int32_t(100 + i);
  PageTable first = filled(pool, 16), second = filled(pool, 16);
  states.insert(cache, a, first, 16, 1);
  states.insert(cache, b, second, 16, 2);
  EXPECT_EQ(cache.stats().pages, 8);  // b's copy of the shared blocks is cached beside a's
  // Each lookup follows the copy that leads to its own blocks, pages and snapshot.
  PrefixCache::Match match = cache.lookup(b, 16, true);
  EXPECT_EQ(match.tokens, 16);
  EXPECT_EQ(match.pages, second.pages);
  EXPECT_EQ(states.restored(cache, match), 2);
  match = cache.lookup(a, 16, true);
  EXPECT_EQ(match.pages, first.pages);
  EXPECT_EQ(states.restored(cache, match), 1);
}

// Host copies of pages for the tests: each page's "K and V" is one int, its contents.
struct FakePages {
  std::vector<int32_t> contents;
  int saves = 0, loads = 0;
  explicit FakePages(int32_t pages) : contents(size_t(pages), -1) {}
  PageCopies copies() {
    PageCopies copies;
    copies.bytes = sizeof(int32_t);
    copies.save = [this](int32_t page, std::byte* dst) {
      std::memcpy(dst, &contents[size_t(page)], sizeof(int32_t));
      ++saves;
    };
    copies.load = [this](const std::byte* src, int32_t page) {
      std::memcpy(&contents[size_t(page)], src, sizeof(int32_t));
      ++loads;
    };
    return copies;
  }
};

TEST(PrefixCache, EvictedPagesStayMatchedFromHostMemoryAndComeBack) {
  KvPagePool pool(4, kPage);
  FakePages fake(4);
  PrefixCache cache(pool, 2 * sizeof(int32_t), fake.copies());  // host room for two pages
  PageTable table = filled(pool, 16);
  for (size_t i = 0; i < 4; ++i) fake.contents[size_t(table.pages[i])] = int32_t(100 + i);
  const std::vector<int32_t> tokens = ids(0, 16);
  cache.insert(tokens, table, 16);
  let_go(pool, cache, table);
  // The last blocks go first, and to the host: the path stays whole.
  ASSERT_TRUE(cache.evict_page());
  ASSERT_TRUE(cache.evict_page());
  EXPECT_EQ(pool.free_pages(), 2);
  EXPECT_EQ(cache.stats().pages, 2);
  EXPECT_EQ(cache.stats().host_pages, 2);
  EXPECT_EQ(cache.stats().host_bytes, 8);
  PrefixCache::Match match = cache.lookup(tokens, 16, false);
  EXPECT_EQ(match.tokens, 16);
  EXPECT_EQ(match.pages, (std::vector<int32_t>{table.pages[0], table.pages[1]}));
  ASSERT_EQ(match.host_blocks.size(), 2u);
  // Restored into new pages, in order, with the contents they had.
  for (int32_t block : match.host_blocks) {
    const int32_t page = *pool.take();
    cache.restore(block, page);
    pool.release(page);  // the "stream" lets go; the cache holds it
    cache.on_stream_release(page);
  }
  EXPECT_EQ(fake.loads, 2);
  EXPECT_EQ(cache.stats().host_pages, 0);
  EXPECT_EQ(cache.stats().host_bytes, 0);
  EXPECT_EQ(cache.stats().restored_pages, 2u);
  match = cache.lookup(tokens, 16, false);
  ASSERT_EQ(match.pages.size(), 4u);
  EXPECT_TRUE(match.host_blocks.empty());
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(fake.contents[size_t(match.pages[i])], int32_t(100 + i));
}

TEST(PrefixCache, AFullHostDropsItsLeastRecentlyUsedBlocksLastFirst) {
  KvPagePool pool(4, kPage);
  FakePages fake(4);
  PrefixCache cache(pool, 2 * sizeof(int32_t), fake.copies());
  PageTable a = filled(pool, 8), b = filled(pool, 8);
  cache.insert(ids(0, 8), a, 8);
  cache.insert(ids(50, 8), b, 8);
  let_go(pool, cache, a);
  let_go(pool, cache, b);
  // a is older: its two blocks go to the host, filling it.
  ASSERT_TRUE(cache.evict_page());
  ASSERT_TRUE(cache.evict_page());
  EXPECT_EQ(cache.lookup(ids(0, 8), 8, false).host_blocks.size(), 2u);
  cache.lookup(ids(50, 8), 8, false);  // b is used since
  // b's last block needs host room: a's last block was used least recently (a lookup marks a
  // path's first blocks used after its last ones) and goes.
  ASSERT_TRUE(cache.evict_page());
  EXPECT_EQ(cache.lookup(ids(0, 8), 8, false).tokens, 4);
  EXPECT_EQ(cache.lookup(ids(50, 8), 8, false).tokens, 8);
  EXPECT_EQ(cache.stats().host_pages, 2);
  EXPECT_EQ(cache.stats().evicted_pages, 1u);
  // With no host room at all, a page is dropped, not kept.
  PrefixCache none(pool, 0, fake.copies());
  PageTable c = filled(pool, 4);
  none.insert(ids(90, 4), c, 4);
  let_go(pool, none, c);
  const int saves = fake.saves;
  ASSERT_TRUE(none.evict_page());
  EXPECT_EQ(fake.saves, saves);
  EXPECT_EQ(none.stats().host_pages, 0);
  EXPECT_EQ(none.lookup(ids(90, 4), 4, false).tokens, 0);
}

TEST(PrefixCache, ClearDropsHostBlocksToo) {
  KvPagePool pool(4, kPage);
  FakePages fake(4);
  FakeStates states(1);
  PrefixCache cache(pool, 1024, fake.copies(), states.copies());
  PageTable table = filled(pool, 16);
  states.insert(cache, ids(0, 16), table, 16, 1);
  let_go(pool, cache, table);
  ASSERT_TRUE(cache.evict_page());
  cache.clear();
  EXPECT_EQ(pool.free_pages(), 4);
  const PrefixCacheStats stats = cache.stats();
  EXPECT_EQ(stats.pages, 0);
  EXPECT_EQ(stats.host_pages, 0);
  EXPECT_EQ(stats.host_bytes, 0);
  EXPECT_EQ(stats.snapshots, 0);
}

TEST(PrefixCache, ASlotSnapshotOnAHostBlockNeverLosesItsSlotTwice) {
  KvPagePool pool(4, kPage);
  FakePages fake(4);
  FakeStates states(2);
  // One cache slot (1); host room for two pages or snapshots.
  PrefixCache cache(pool, 2 * sizeof(int32_t), fake.copies(), states.copies({1}));
  PageTable a = filled(pool, 8);
  states.insert(cache, ids(0, 8), a, 8, 100);  // a's last block: its snapshot in slot 1
  let_go(pool, cache, a);
  ASSERT_TRUE(cache.evict_page());  // a's last block to the host, with its slot snapshot
  ASSERT_TRUE(cache.evict_page());  // then its first: the host is full
  // b's snapshot needs the slot: a's moves out, and with no host room it goes. The host blocks
  // before it stay (dropping one would drop the block whose slot is being freed).
  PageTable b = filled(pool, 4);
  states.insert(cache, ids(50, 4), b, 4, 200);
  PrefixCacheStats stats = cache.stats();
  EXPECT_EQ(stats.snapshots, 1);
  EXPECT_EQ(stats.device_snapshots, 1);
  EXPECT_EQ(stats.host_pages, 2);
  EXPECT_EQ(stats.host_bytes, 8);
  EXPECT_EQ(cache.lookup(ids(0, 8), 8, true).tokens, 0);
  EXPECT_EQ(cache.lookup(ids(0, 8), 8, false).host_blocks.size(), 2u);
  EXPECT_EQ(states.restored(cache, cache.lookup(ids(50, 4), 4, true)), 200);
  // c's snapshot takes the slot again: b's moves to the host (a's blocks make room), and each
  // restores its own state.
  PageTable c = filled(pool, 4);
  states.insert(cache, ids(90, 4), c, 4, 300);
  stats = cache.stats();
  EXPECT_EQ(stats.snapshots, 2);
  EXPECT_EQ(stats.device_snapshots, 1);
  EXPECT_LE(stats.host_bytes, 8);
  EXPECT_EQ(states.restored(cache, cache.lookup(ids(50, 4), 4, true)), 200);
  EXPECT_EQ(states.restored(cache, cache.lookup(ids(90, 4), 4, true)), 300);
  cache.clear();
  EXPECT_EQ(cache.stats().snapshots, 0);
  EXPECT_EQ(cache.stats().device_snapshots, 0);
  EXPECT_EQ(cache.stats().host_bytes, 0);
}

TEST(StreamMemoryCache, AdmissionRestoresHostBlocksIntoTheStreamsOwnPages) {
  FakePages fake(6);
  StreamMemory memory(StreamMemorySettings{6, kPage, 0, true, 1024, fake.copies(), {}});
  PrefixCache& cache = *memory.cache();
  const std::vector<int32_t> tokens = ids(0, 16);
  auto a = memory.admit(16);
  ASSERT_TRUE(a);
  memory.grow(*a, 16);
  for (size_t i = 0; i < 4; ++i) fake.contents[size_t(a->table.pages[i])] = int32_t(100 + i);
  cache.insert(tokens, a->table, 16);
  memory.release(*a);
  // b fills all six pages: four of a's cached pages go to the host (two were free).
  auto b = memory.admit(24);
  ASSERT_TRUE(b);
  memory.grow(*b, 24);
  EXPECT_EQ(cache.stats().host_pages, 4);
  memory.release(*b);
  // c resumes a's prefix: every block comes back, into pages of its own, before it runs.
  PrefixCache::Match match = cache.lookup(tokens, 16, false);
  ASSERT_EQ(match.tokens, 16);
  ASSERT_EQ(match.host_blocks.size(), 4u);
  auto c = memory.admit(20, &match);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->table.pages.size(), 4u);
  EXPECT_EQ(c->shared_pages, 0);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(fake.contents[size_t(c->table.pages[i])], int32_t(100 + i));
  memory.grow(*c, 20);
  memory.release(*c);
  EXPECT_EQ(memory.unreserved_pages(), 6);
  EXPECT_EQ(cache.lookup(tokens, 16, false).pages.size(), 4u);
}

TEST(StreamMemoryCache, CachedPagesAreRoomAndEvictedWhenAStreamGrows) {
  StreamMemory memory(StreamMemorySettings{8, kPage, 0, true, 0, {}, {}});
  PrefixCache& cache = *memory.cache();
  auto a = memory.admit(32);
  ASSERT_TRUE(a);
  memory.grow(*a, 32);
  cache.insert(ids(0, 32), a->table, 32);
  EXPECT_FALSE(memory.can_admit(4));  // every page is a's
  memory.release(*a);
  EXPECT_EQ(memory.free_pages(), 0);  // all cached
  EXPECT_EQ(memory.unreserved_pages(), 8);
  // A stream that shares nothing still fits: cached pages give way as it grows.
  auto b = memory.admit(32);
  ASSERT_TRUE(b);
  memory.grow(*b, 20);
  EXPECT_EQ(cache.stats().pages, 3);
  memory.release(*b);
  EXPECT_EQ(memory.unreserved_pages(), 8);
}

TEST(StreamMemoryCache, SharedPagesAreHeldOnceAndCountedOnce) {
  StreamMemory memory(StreamMemorySettings{8, kPage, 0, true, 0, {}, {}});
  PrefixCache& cache = *memory.cache();
  const std::vector<int32_t> tokens = ids(0, 20);
  auto a = memory.admit(20);
  ASSERT_TRUE(a);
  memory.grow(*a, 16);
  cache.insert(tokens, a->table, 16);
  PrefixCache::Match match = cache.lookup(tokens, 19, false);
  ASSERT_EQ(match.tokens, 16);
  // a holds 5 pages' worth (4 taken, 1 promised); b shares a's 4 and needs 1 more.
  EXPECT_EQ(memory.unreserved_pages(), 3);
  auto b = memory.admit(20, &match);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->table.pages, match.pages);
  EXPECT_EQ(memory.unreserved_pages(), 2);
  memory.release(*a);
  EXPECT_EQ(memory.unreserved_pages(), 3);  // a's promised page; the shared four are b's now
  memory.grow(*b, 20);
  memory.release(*b);
  EXPECT_EQ(memory.unreserved_pages(), 8);
  EXPECT_EQ(memory.free_pages(), 4);
}

}  // namespace
}  // namespace lockstep
