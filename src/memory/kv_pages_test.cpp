#include "memory/kv_pages.h"

#include <gtest/gtest.h>

#include <set>

namespace lockstep {
namespace {

TEST(KvPagePool, GrowsOnlyWhenEveryPageIsThere) {
  KvPagePool pool(4, 16);
  PageTable a, b;
  EXPECT_EQ(pool.pages_to_grow(a, 17), 2);
  ASSERT_TRUE(pool.grow(a, 17));
  EXPECT_EQ(a.pages.size(), 2u);
  EXPECT_EQ(pool.free_pages(), 2);
  EXPECT_FALSE(pool.grow(b, 48));  // needs 3, 2 free: nothing changes
  EXPECT_TRUE(b.pages.empty());
  EXPECT_EQ(pool.free_pages(), 2);
  ASSERT_TRUE(pool.grow(a, 32));  // already held
  EXPECT_EQ(pool.free_pages(), 2);
  ASSERT_TRUE(pool.grow(b, 32));
  EXPECT_EQ(pool.free_pages(), 0);
  std::set<int32_t> ids(a.pages.begin(), a.pages.end());
  ids.insert(b.pages.begin(), b.pages.end());
  EXPECT_EQ(ids.size(), 4u);  // no page is handed out twice
}

TEST(KvPagePool, ReleaseReturnsEveryPage) {
  KvPagePool pool(8, 16);
  PageTable a;
  ASSERT_TRUE(pool.grow(a, 100));
  pool.release(a);
  EXPECT_TRUE(a.pages.empty());
  EXPECT_EQ(pool.free_pages(), 8);
  ASSERT_TRUE(pool.grow(a, 128));
}

}  // namespace
}  // namespace lockstep
