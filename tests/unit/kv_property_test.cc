// Property test of the KV-cache manager: thousands of random add / step / finish / abort /
// preempt operations over requests that share prefixes. After every operation the block pool
// and the block tables agree (no negative or leaked reference), and at the end every block is
// back in the pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace locus {
namespace {

struct LiveRequest {
  std::vector<int32_t> tokens;
  int num_computed = 0;
  int target_len = 0;
  bool holds_blocks = false;
};

void run_random_ops(bool enable_caching, uint32_t seed, int num_ops) {
  constexpr int kBlockSize = 4;
  constexpr int kNumBlocks = 48;
  KVCacheManager m({kNumBlocks, kBlockSize, enable_caching});
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  // A few shared prefixes so that prefix hits, shared blocks and eviction all happen.
  std::vector<std::vector<int32_t>> prefixes(4);
  for (auto& p : prefixes) {
    for (int i = 0; i < uniform(0, 20); ++i)
      p.push_back(uniform(0, 50));
  }
  std::map<RequestId, LiveRequest> live;
  RequestId next_id = 1;
  int hits = 0;
  int failed_allocations = 0;

  for (int op = 0; op < num_ops; ++op) {
    const int kind = uniform(0, 9);
    if (kind <= 2 || live.empty()) {  // add
      LiveRequest r;
      r.tokens = prefixes[static_cast<size_t>(uniform(0, 3))];
      for (int i = 0; i < uniform(1, 12); ++i)
        r.tokens.push_back(uniform(0, 50));
      r.target_len = static_cast<int>(r.tokens.size()) + uniform(0, 20);
      live.emplace(next_id++, std::move(r));
      continue;
    }
    auto it = live.begin();
    std::advance(it, uniform(0, static_cast<int>(live.size()) - 1));
    const RequestId id = it->first;
    LiveRequest& r = it->second;
    if (kind <= 6) {  // step: prefill chunk or decode
      KVRequestView v{id, r.tokens, r.num_computed, 0, false};
      ComputedBlocks hit;
      if (!r.holds_blocks) hit = m.get_computed_blocks(v);
      const int computed = r.num_computed + hit.num_computed_tokens;
      ASSERT_LT(computed, static_cast<int>(r.tokens.size()));
      const int num_new = uniform(1, static_cast<int>(r.tokens.size()) - computed);
      if (m.allocate_slots(v, num_new, &hit, uniform(0, 2)) == nullptr) {
        ++failed_allocations;
      } else {
        hits += hit.num_computed_tokens > 0 ? 1 : 0;
        r.holds_blocks = true;
        r.num_computed = computed + num_new;
        if (r.num_computed == static_cast<int>(r.tokens.size())) {
          if (static_cast<int>(r.tokens.size()) >= r.target_len) {
            m.free(id);  // finished
            live.erase(it);
          } else {
            r.tokens.push_back(uniform(0, 50));  // a sampled token
          }
        }
      }
    } else if (kind == 7) {  // abort
      m.free(id);
      live.erase(it);
    } else {  // preempt: drop the blocks, recompute later
      m.free(id);
      r.num_computed = 0;
      r.holds_blocks = false;
    }
    Status s = m.check_invariants();
    ASSERT_TRUE(s.is_ok()) << "after op " << op << ": " << s.to_string();
    ASSERT_GE(m.num_free_blocks(), 0);
    ASSERT_LE(m.num_free_blocks(), kNumBlocks);
  }
  for (auto& [id, r] : live)
    m.free(id);
  EXPECT_EQ(m.num_free_blocks(), kNumBlocks);
  EXPECT_EQ(m.num_tracked_requests(), 0u);
  for (BlockId b = 0; b < kNumBlocks; ++b)
    EXPECT_EQ(m.block_pool().ref_count(b), 0);
  EXPECT_TRUE(m.check_invariants().is_ok());
  EXPECT_TRUE(m.reset_prefix_cache());
  EXPECT_GT(failed_allocations, 0) << "the pool never ran out: the test is too easy";
  if (enable_caching) {
    EXPECT_GT(hits, 0);
  }
}

TEST(KVProperty, RandomOperationsNeverLeakWithPrefixCaching) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    run_random_ops(true, seed, 1000);
  }
}

TEST(KVProperty, RandomOperationsNeverLeakWithoutPrefixCaching) {
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(seed);
    run_random_ops(false, seed, 1000);
  }
}

}  // namespace
}  // namespace locus
