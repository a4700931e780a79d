// BlockPool: ref counts, LRU free queue order, hash map consistency; the flat hash table.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

#include "kv/block_hash_table.h"

namespace locus {
namespace {

BlockHash hash_of(uint64_t v) {
  return {v, ~v};
}

TEST(BlockPool, HandsOutBlocksInIdOrderAndTakesThemBack) {
  BlockPool pool(4, /*enable_caching=*/true);
  EXPECT_EQ(pool.num_free_blocks(), 4);
  std::vector<BlockId> got;
  pool.get_new_blocks(3, got);
  EXPECT_EQ(got, (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(pool.num_free_blocks(), 1);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.75);
  for (BlockId b : got)
    EXPECT_EQ(pool.ref_count(b), 1);
  pool.free_blocks(got);
  EXPECT_EQ(pool.num_free_blocks(), 4);
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, FreedBlocksAreReusedLeastRecentlyFreedFirst) {
  BlockPool pool(4, true);
  std::vector<BlockId> all;
  pool.get_new_blocks(4, all);
  // Free in the order 2, 0, 3, 1: they must come back in that order.
  const std::vector<BlockId> order = {2, 0, 3, 1};
  for (BlockId b : order)
    pool.free_blocks(std::vector<BlockId>{b});
  std::vector<BlockId> again;
  pool.get_new_blocks(4, again);
  EXPECT_EQ(again, order);
}

TEST(BlockPool, TouchRevivesAnEvictableCachedBlockFromTheMiddleOfTheQueue) {
  BlockPool pool(3, true);
  std::vector<BlockId> b;
  pool.get_new_blocks(3, b);
  pool.cache_full_block(1, hash_of(7));
  pool.free_blocks(b);  // queue: 0, 1, 2; block 1 keeps its hash
  ASSERT_EQ(pool.get_cached_block(hash_of(7)), 1);
  pool.touch(std::vector<BlockId>{1});
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  std::vector<BlockId> fresh;
  pool.get_new_blocks(2, fresh);
  EXPECT_EQ(fresh, (std::vector<BlockId>{0, 2}));
  EXPECT_EQ(pool.get_cached_block(hash_of(7)), 1);  // still cached: it was never evicted
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, ReusingACachedBlockEvictsItsHash) {
  BlockPool pool(1, true);
  std::vector<BlockId> b;
  pool.get_new_blocks(1, b);
  pool.cache_full_block(0, hash_of(9));
  pool.free_blocks(b);
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  std::vector<BlockId> again;
  pool.get_new_blocks(1, again);
  EXPECT_FALSE(pool.get_cached_block(hash_of(9)).has_value());
  EXPECT_FALSE(pool.block_hash(0).has_value());
  EXPECT_EQ(pool.num_evictions(), 1u);
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, SharedBlocksReturnOnlyWhenTheLastReferenceGoes) {
  BlockPool pool(2, true);
  std::vector<BlockId> b;
  pool.get_new_blocks(1, b);
  pool.touch(b);
  EXPECT_EQ(pool.ref_count(0), 2);
  pool.free_blocks(b);
  EXPECT_EQ(pool.num_free_blocks(), 1);
  pool.free_blocks(b);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, FirstBlockCachedUnderAHashWins) {
  BlockPool pool(2, true);
  std::vector<BlockId> b;
  pool.get_new_blocks(2, b);
  pool.cache_full_block(0, hash_of(5));
  pool.cache_full_block(1, hash_of(5));
  EXPECT_EQ(pool.get_cached_block(hash_of(5)), 0);
  EXPECT_FALSE(pool.block_hash(1).has_value());
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, CachingDisabledNeverCaches) {
  BlockPool pool(2, false);
  std::vector<BlockId> b;
  pool.get_new_blocks(1, b);
  pool.cache_full_block(0, hash_of(1));
  EXPECT_FALSE(pool.get_cached_block(hash_of(1)).has_value());
}

TEST(BlockPool, ResetPrefixCacheOnlyWhenNothingIsReferenced) {
  BlockPool pool(2, true);
  std::vector<BlockId> b;
  pool.get_new_blocks(1, b);
  pool.cache_full_block(0, hash_of(3));
  EXPECT_FALSE(pool.reset_prefix_cache());
  pool.free_blocks(b);
  EXPECT_TRUE(pool.reset_prefix_cache());
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPoolDeathTest, FreeingAnUnreferencedBlockAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  BlockPool pool(1, true);
  // The message goes to the process logger, which may not be stderr here.
  EXPECT_DEATH(pool.free_blocks(std::vector<BlockId>{0}), "");
}

}  // namespace
}  // namespace locus

namespace locus {
namespace {

TEST(BlockHashTable, MatchesAReferenceMapUnderRandomInsertAndErase) {
  // Few distinct home slots (lo in 0..63 in a 64-slot table) so probe runs collide, wrap around
  // and get shifted back on erase.
  BlockHashTable table(32);
  std::unordered_map<uint64_t, int32_t> reference;
  std::mt19937_64 rng(7);
  for (int op = 0; op < 20000; ++op) {
    const uint64_t key = rng() % 48;
    const BlockHash h{key * 0x9E3779B97F4A7C15ull, key % 64};
    if (rng() % 2 == 0 && reference.size() < 32) {
      const bool inserted = table.insert(h, static_cast<int32_t>(op));
      EXPECT_EQ(inserted, reference.emplace(key, op).second);
    } else {
      table.erase(h);
      reference.erase(key);
    }
    ASSERT_EQ(table.size(), reference.size());
    for (uint64_t k = 0; k < 48; ++k) {
      auto found = table.find({k * 0x9E3779B97F4A7C15ull, k % 64});
      auto it = reference.find(k);
      ASSERT_EQ(found.has_value(), it != reference.end()) << "op " << op << " key " << k;
      if (found) {
        ASSERT_EQ(*found, it->second);
      }
    }
  }
  table.clear();
  EXPECT_EQ(table.size(), 0u);
}

}  // namespace
}  // namespace locus
