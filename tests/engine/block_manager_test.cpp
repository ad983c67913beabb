// BlockManager: the page pool's counts and order, and the prefix cache's rules (full pages
// only, up to a boundary, chained hashes, reuse forgets a page's prefix, forget_prefixes).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "engine/block_manager.h"
#include "scheduler_test_util.h"

using namespace jet;
using namespace jet::test;

TEST(BlockManager, AllocatesDistinctPagesUntilThePoolIsEmpty) {
  BlockManager pool(5, 4);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.allocate(3, a));
  ASSERT_TRUE(pool.allocate(2, b));
  EXPECT_EQ(pool.num_free(), 0);
  std::set<int32_t> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  EXPECT_EQ(all.size(), 5u);
  std::vector<int32_t> c;
  EXPECT_FALSE(pool.allocate(1, c));  // nothing taken on failure
  EXPECT_TRUE(c.empty());
  pool.release(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_FALSE(pool.allocate(4, c));
  EXPECT_EQ(pool.num_free(), 3);
}

TEST(BlockManager, RejectsAnEmptyPool) { EXPECT_THROW(BlockManager(0, 4), Error); }

TEST(BlockManager, SharesPublishedFullPagesOfAPrompt) {
  BlockManager pool(8, 4);
  const std::vector<int32_t> prompt = iota_tokens(10, 100);  // two full pages and a partial one
  std::vector<int32_t> first;
  ASSERT_TRUE(pool.allocate(3, first));
  pool.publish_prefix(prompt, 10, first);
  // The same prompt finds the two full pages, not the partial third.
  std::vector<int32_t> shared = pool.acquire_cached_prefix(prompt, 10, 1);
  EXPECT_EQ(shared, std::vector<int32_t>(first.begin(), first.begin() + 2));
  // Held twice now: releasing the first owner keeps them out of the free list.
  const int free_before = pool.num_free();
  pool.release(first);
  EXPECT_EQ(pool.num_free(), free_before + 1);  // only the unshared partial page
  pool.release(shared);
  EXPECT_EQ(pool.num_free(), 8);
}

TEST(BlockManager, PrefixesChainSoOnlyLeadingPagesMatch) {
  BlockManager pool(8, 4);
  std::vector<int32_t> prompt = iota_tokens(8, 100), pages;
  ASSERT_TRUE(pool.allocate(2, pages));
  pool.publish_prefix(prompt, 8, pages);
  // The second page alone, after a different first page, is another prefix.
  std::vector<int32_t> other = prompt;
  other[0] = 7;
  EXPECT_TRUE(pool.acquire_cached_prefix(other, 8, 1).empty());
  // Only `cacheable` tokens count: with 5, one page.
  std::vector<int32_t> one = pool.acquire_cached_prefix(prompt, 5, 1);
  EXPECT_EQ(one, std::vector<int32_t>{pages[0]});
  pool.release(one);
}

TEST(BlockManager, CachedPrefixesEndOnTheBoundary) {
  BlockManager pool(8, 4);
  const std::vector<int32_t> prompt = iota_tokens(12, 100);
  std::vector<int32_t> pages;
  ASSERT_TRUE(pool.allocate(3, pages));
  pool.publish_prefix(prompt, 12, pages);
  // Three pages are 12 tokens: with blocks of 8 only the first 8 (two pages) may be reused.
  std::vector<int32_t> shared = pool.acquire_cached_prefix(prompt, 12, 8);
  EXPECT_EQ(shared.size(), 2u);
  pool.release(shared);
  EXPECT_TRUE(pool.acquire_cached_prefix(prompt, 12, 16).empty());
  EXPECT_THROW(pool.acquire_cached_prefix(prompt, 12, 0), Error);
}

TEST(BlockManager, ReusingAFreedPageForgetsItsPrefix) {
  BlockManager pool(2, 4);
  const std::vector<int32_t> prompt = iota_tokens(4, 100);
  std::vector<int32_t> pages;
  ASSERT_TRUE(pool.allocate(1, pages));
  pool.publish_prefix(prompt, 4, pages);
  pool.release(pages);
  // Freed but cached: still found until the page is handed out again.
  std::vector<int32_t> again = pool.acquire_cached_prefix(prompt, 4, 1);
  ASSERT_EQ(again.size(), 1u);
  pool.release(again);
  std::vector<int32_t> all;
  ASSERT_TRUE(pool.allocate(2, all));  // takes the cached page too
  EXPECT_TRUE(pool.acquire_cached_prefix(prompt, 4, 1).empty());
}

TEST(BlockManager, ForgetPrefixesDropsEveryPublishedPage) {
  BlockManager pool(4, 4);
  const std::vector<int32_t> prompt = iota_tokens(8, 100);
  std::vector<int32_t> pages;
  ASSERT_TRUE(pool.allocate(2, pages));
  pool.publish_prefix(prompt, 8, pages);
  pool.forget_prefixes();
  EXPECT_TRUE(pool.acquire_cached_prefix(prompt, 8, 1).empty());
  EXPECT_EQ(pool.num_free(), 2);  // the holder keeps its pages
}

TEST(BlockManager, FreedPagesGoToTheBackSoCachedOnesLiveLongest) {
  BlockManager pool(3, 4);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.allocate(1, a));
  const int32_t first = a[0];
  pool.release(a);
  std::vector<int32_t> b;
  ASSERT_TRUE(pool.allocate(2, b));
  EXPECT_EQ(std::count(b.begin(), b.end(), first), 0);  // the two never-used pages come first
}
