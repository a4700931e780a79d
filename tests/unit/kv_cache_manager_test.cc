// KVCacheManager: slot allocation, lookahead, prefix hits, salts, sizing from the KV spec.
#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/kv_cache_spec.h"

namespace locus {
namespace {

std::vector<int32_t> iota_tokens(int n, int32_t start = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

KVRequestView view(RequestId id, const std::vector<int32_t>& tokens, int computed = 0,
                   uint64_t salt = 0) {
  return {id, tokens, computed, salt, false};
}

TEST(KVCacheManager, AllocatesCeilOfTokensOverBlockSize) {
  KVCacheManager m({10, 4, true});
  auto tokens = iota_tokens(9);
  const auto* blocks = m.allocate_slots(view(1, tokens), 9);
  ASSERT_NE(blocks, nullptr);
  EXPECT_EQ(blocks->size(), 3u);
  EXPECT_EQ(m.num_free_blocks(), 7);
  // Decoding into the free slots of the last block needs nothing new.
  tokens.push_back(100);
  ASSERT_NE(m.allocate_slots(view(1, tokens, 9), 1), nullptr);
  EXPECT_EQ(m.block_ids(1).size(), 3u);
  EXPECT_TRUE(m.check_invariants().is_ok());
}

TEST(KVCacheManager, LookaheadReservesExtraSlots) {
  KVCacheManager m({10, 4, true});
  auto tokens = iota_tokens(4);
  ASSERT_NE(m.allocate_slots(view(1, tokens), 4, nullptr, /*num_lookahead_tokens=*/5), nullptr);
  EXPECT_EQ(m.block_ids(1).size(), 3u);  // 9 slots
}

TEST(KVCacheManager, FailedAllocationChangesNothing) {
  KVCacheManager m({3, 4, true});
  auto a = iota_tokens(8);
  ASSERT_NE(m.allocate_slots(view(1, a), 8), nullptr);
  auto b = iota_tokens(8, 50);
  EXPECT_EQ(m.allocate_slots(view(2, b), 8), nullptr);
  EXPECT_EQ(m.num_free_blocks(), 1);
  EXPECT_TRUE(m.block_ids(2).empty());
  m.free(2);
  m.free(1);
  EXPECT_EQ(m.num_free_blocks(), 3);
  EXPECT_TRUE(m.check_invariants().is_ok());
}

TEST(KVCacheManager, PrefixHitCoversFullBlocksButNeverTheLastToken) {
  KVCacheManager m({20, 4, true});
  auto tokens = iota_tokens(12);  // exactly three full blocks
  ASSERT_NE(m.allocate_slots(view(1, tokens), 12), nullptr);
  m.free(1);
  // Same 12 tokens: the last block holds the last token, which must be recomputed.
  ComputedBlocks hit = m.get_computed_blocks(view(2, tokens));
  EXPECT_EQ(hit.num_computed_tokens, 8);
  EXPECT_EQ(hit.blocks.size(), 2u);
  // 13 tokens sharing the first 12: all three full blocks hit.
  auto longer = tokens;
  longer.push_back(77);
  ComputedBlocks hit3 = m.get_computed_blocks(view(3, longer));
  EXPECT_EQ(hit3.num_computed_tokens, 12);
  ASSERT_NE(m.allocate_slots(view(3, longer), 1, &hit3), nullptr);
  EXPECT_EQ(m.block_ids(3).size(), 4u);
  EXPECT_EQ(std::vector<BlockId>(m.block_ids(3).begin(), m.block_ids(3).begin() + 3), hit3.blocks);
  EXPECT_TRUE(m.check_invariants().is_ok());
}

TEST(KVCacheManager, HitsAreSharedByReferenceWhileBothRun) {
  KVCacheManager m({20, 4, true});
  auto a = iota_tokens(10);
  ASSERT_NE(m.allocate_slots(view(1, a), 10), nullptr);
  auto b = iota_tokens(10);
  b[9] = 99;
  ComputedBlocks hit = m.get_computed_blocks(view(2, b));
  EXPECT_EQ(hit.num_computed_tokens, 8);
  ASSERT_NE(m.allocate_slots(view(2, b), 2, &hit), nullptr);
  EXPECT_EQ(m.block_pool().ref_count(hit.blocks[0]), 2);
  EXPECT_EQ(m.num_free_blocks(), 20 - 3 - 1);
  m.free(1);
  EXPECT_EQ(m.block_pool().ref_count(hit.blocks[0]), 1);
  m.free(2);
  EXPECT_EQ(m.num_free_blocks(), 20);
  EXPECT_TRUE(m.check_invariants().is_ok());
}

TEST(KVCacheManager, PartialBlocksAreNeverCached) {
  KVCacheManager m({20, 4, true});
  auto a = iota_tokens(6);
  ASSERT_NE(m.allocate_slots(view(1, a), 6), nullptr);
  EXPECT_EQ(m.block_pool().num_cached_blocks(), 1);
  // Computing only part of a prompt caches only the blocks the step completes.
  auto b = iota_tokens(12, 100);
  ASSERT_NE(m.allocate_slots(view(2, b), 5), nullptr);
  EXPECT_EQ(m.block_pool().num_cached_blocks(), 2);
}

TEST(KVCacheManager, CacheSaltSeparatesTenants) {
  KVCacheManager m({20, 4, true});
  auto tokens = iota_tokens(9);
  ASSERT_NE(m.allocate_slots(view(1, tokens, 0, cache_salt_key("alice")), 9), nullptr);
  m.free(1);
  EXPECT_EQ(m.get_computed_blocks(view(2, tokens, 0, cache_salt_key("bob"))).num_computed_tokens,
            0);
  EXPECT_EQ(m.get_computed_blocks(view(3, tokens, 0, 0)).num_computed_tokens, 0);
  EXPECT_EQ(m.get_computed_blocks(view(4, tokens, 0, cache_salt_key("alice"))).num_computed_tokens,
            8);
}

TEST(KVCacheManager, SkipCacheReadsStillFillsTheCache) {
  KVCacheManager m({20, 4, true});
  auto tokens = iota_tokens(9);
  KVRequestView v = view(1, tokens);
  v.skip_cache_reads = true;
  ASSERT_NE(m.allocate_slots(v, 9), nullptr);
  KVRequestView v2 = view(2, tokens);
  v2.skip_cache_reads = true;
  EXPECT_EQ(m.get_computed_blocks(v2).num_computed_tokens, 0);
  EXPECT_EQ(m.get_computed_blocks(view(3, tokens)).num_computed_tokens, 8);
}

TEST(KVCacheManager, DisabledPrefixCachingNeverHits) {
  KVCacheManager m({20, 4, false});
  auto tokens = iota_tokens(9);
  ASSERT_NE(m.allocate_slots(view(1, tokens), 9), nullptr);
  m.free(1);
  EXPECT_EQ(m.get_computed_blocks(view(2, tokens)).num_computed_tokens, 0);
  EXPECT_EQ(m.block_pool().num_cached_blocks(), 0);
  EXPECT_EQ(m.prefix_cache_stats().requests, 0u);
}

TEST(KVCacheManager, EvictableHitsDoNotCountAsFreeTwice) {
  // 3 blocks: request 1 fills and frees 2 cached blocks. Request 2 hits both and needs 2 more
  // blocks: only 1 is really free once the hits are revived, so allocation must fail.
  KVCacheManager m({3, 4, true});
  auto a = iota_tokens(8);
  ASSERT_NE(m.allocate_slots(view(1, a), 8), nullptr);
  m.free(1);
  auto b = iota_tokens(17);
  ComputedBlocks hit = m.get_computed_blocks(view(2, b));
  ASSERT_EQ(hit.num_computed_tokens, 8);
  EXPECT_EQ(m.allocate_slots(view(2, b), 9, &hit), nullptr);
  EXPECT_EQ(m.num_free_blocks(), 3);
  ASSERT_NE(m.allocate_slots(view(2, b), 4, &hit), nullptr);
  EXPECT_EQ(m.num_free_blocks(), 0);
  EXPECT_TRUE(m.check_invariants().is_ok());
}

TEST(KVCacheManager, HitRateCounters) {
  KVCacheManager m({20, 4, true});
  auto tokens = iota_tokens(9);
  (void)m.get_computed_blocks(view(1, tokens));
  ASSERT_NE(m.allocate_slots(view(1, tokens), 9), nullptr);
  (void)m.get_computed_blocks(view(2, tokens));
  EXPECT_EQ(m.prefix_cache_stats().requests, 2u);
  EXPECT_EQ(m.prefix_cache_stats().queries, 18u);
  EXPECT_EQ(m.prefix_cache_stats().hits, 8u);
  EXPECT_GT(m.usage(), 0.0);
}

TEST(KVCacheSpec, SizesGqaAndMlaDifferently) {
  // Qwen3-30B-A3B-like: 48 layers, 4 kv heads of 128, bf16 -> 2*4*128*2 = 2048 B per token/layer.
  auto gqa = KVCacheSpec::full_attention(48, 4, 128, DType::kBF16, 16);
  EXPECT_EQ(gqa.bytes_per_token_per_layer(), 2048);
  EXPECT_EQ(gqa.bytes_per_block(), 2048 * 16 * 48);
  // DeepSeek-V2-Lite-like MLA: (512 + 64) * 2 = 1152 B per token/layer, one latent, no K/V.
  auto mla = KVCacheSpec::mla(27, 512, 64, DType::kBF16, 16);
  EXPECT_EQ(mla.bytes_per_token_per_layer(), 1152);
  auto fp8 = KVCacheSpec::mla(27, 512, 64, DType::kF8E4M3, 16);
  EXPECT_EQ(fp8.bytes_per_token_per_layer(), 576);
  const int64_t budget = int64_t{1} << 30;
  auto n = num_blocks_for_budget(mla, budget);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(*n, budget / mla.bytes_per_block());
  EXPECT_FALSE(num_blocks_for_budget(gqa, 100).has_value());
}

TEST(KVCacheSpec, ValidationNamesTheBadField) {
  auto bad = KVCacheSpec::full_attention(4, 0, 128, DType::kBF16);
  Status s = bad.validate();
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("num_kv_heads"), std::string::npos);
  auto fp4 = KVCacheSpec::mla(4, 512, 64, DType::kF4E2M1);
  EXPECT_EQ(fp4.validate().code(), ErrorCode::kUnsupported);
  auto zero_block = KVCacheSpec::mla(4, 512, 64, DType::kBF16, 0);
  EXPECT_FALSE(zero_block.validate().is_ok());
}

}  // namespace
}  // namespace locus
