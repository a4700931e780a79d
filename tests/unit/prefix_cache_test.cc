// Automatic prefix caching end to end: a second request sharing a 30k-token prefix gets every
// full prefix block as a hit and computes only its tail, and gets the same output as if it ran
// alone; freed cached blocks are evicted in LRU order.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "engine/engine_core.h"
#include "engine/fake_model.h"
#include "sched/scheduler.h"

namespace locus {
namespace {

std::vector<int32_t> tokens_from(uint32_t seed, int n, int vocab) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 1;
  for (auto& t : v) {
    x = x * 1664525u + 1013904223u;
    t = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(vocab));
  }
  return v;
}

EngineCoreRequest make(RequestId id, std::vector<int32_t> prompt, int max_tokens) {
  EngineCoreRequest r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  return r;
}

// Drives a scheduler with a stand-in model that samples token 7 for everyone.
void run_until_idle(Scheduler& s) {
  while (s.has_unfinished_requests()) {
    SchedulerOutput out = s.schedule();
    ModelRunnerOutput mo;
    for (const auto& r : out.scheduled)
      mo.sampled_token_ids.push_back(r.needs_sample ? 7 : -1);
    ASSERT_TRUE(s.update_from_output(out, mo).has_value());
  }
}

TEST(PrefixCache, SecondRequestWith30kSharedPrefixComputesOnlyItsTail) {
  constexpr int kPrefix = 30000;  // 1875 blocks of 16
  SchedulerConfig config;
  config.max_model_len = 32768;
  config.max_num_batched_tokens = 8192;
  auto s = Scheduler::create(config, {4096, 16, true});
  ASSERT_TRUE(s.has_value()) << s.error().to_string();
  Scheduler& sched = **s;

  auto prefix = tokens_from(1, kPrefix, 1000);
  auto first = prefix;
  auto tail1 = tokens_from(2, 100, 1000);
  first.insert(first.end(), tail1.begin(), tail1.end());
  ASSERT_TRUE(sched.add_request(make(1, first, 2)).is_ok());
  run_until_idle(sched);

  auto second = prefix;
  auto tail2 = tokens_from(3, 57, 1000);
  second.insert(second.end(), tail2.begin(), tail2.end());
  ASSERT_TRUE(sched.add_request(make(2, second, 2)).is_ok());
  SchedulerOutput out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_computed_tokens, kPrefix);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 57);
  EXPECT_EQ(out.total_num_scheduled_tokens, 57);
  EXPECT_TRUE(out.scheduled[0].needs_sample);
  EXPECT_EQ(sched.find_request(2)->num_cached_tokens, kPrefix);
  const PrefixCacheStats& stats = sched.kv_cache_manager().prefix_cache_stats();
  EXPECT_EQ(stats.hits, static_cast<uint64_t>(kPrefix));
}

TEST(PrefixCache, HitsGiveTheSameOutputAsAColdRunThroughTheFakeModel) {
  constexpr int kPrefix = 30000;
  EngineConfig config;
  config.scheduler.max_model_len = 32768;
  config.scheduler.max_num_batched_tokens = 8192;
  config.num_kv_blocks = 4096;
  FakeModelConfig fm;
  fm.vocab_size = 1000;
  fm.block_size = 16;

  auto prefix = tokens_from(1, kPrefix, 1000);
  auto first = prefix;
  first.push_back(5);
  auto second = prefix;
  for (int32_t t : tokens_from(4, 40, 1000))
    second.push_back(t);

  // Cold: the second prompt alone.
  auto cold = EngineCore::create(config, std::make_unique<FakeModel>(fm));
  ASSERT_TRUE(cold.has_value());
  ASSERT_TRUE((*cold)->add_request(make(2, second, 8)).is_ok());
  std::vector<int32_t> cold_tokens;
  while ((*cold)->has_unfinished_requests()) {
    auto outs = (*cold)->step();
    ASSERT_TRUE(outs.has_value()) << outs.error().to_string();
    for (auto& o : *outs)
      cold_tokens.insert(cold_tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
  }

  // Warm: the first prompt fills the cache, then the second reuses 30000 tokens of KV.
  auto warm = EngineCore::create(config, std::make_unique<FakeModel>(fm));
  ASSERT_TRUE(warm.has_value());
  EngineCore& core = **warm;
  ASSERT_TRUE(core.add_request(make(1, first, 1)).is_ok());
  while (core.has_unfinished_requests())
    ASSERT_TRUE(core.step().has_value());
  const auto* model = dynamic_cast<const FakeModel*>(&core.model_runner());
  const int64_t computed_before = model->num_computed_tokens();
  ASSERT_TRUE(core.add_request(make(2, second, 8)).is_ok());
  std::vector<int32_t> warm_tokens;
  while (core.has_unfinished_requests()) {
    auto outs = core.step();
    ASSERT_TRUE(outs.has_value()) << outs.error().to_string();
    for (auto& o : *outs) {
      EXPECT_EQ(o.num_cached_tokens, kPrefix);
      warm_tokens.insert(warm_tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  }
  EXPECT_EQ(warm_tokens, cold_tokens);
  // 40 tail tokens, then 7 decode steps (the 8th token is sampled, never fed back).
  EXPECT_EQ(model->num_computed_tokens() - computed_before, 40 + 7);
}

TEST(PrefixCache, FreedCachedBlocksAreEvictedLeastRecentlyUsedFirst) {
  // 6 blocks of 4. A (8 tokens) then B (8 tokens) finish, leaving 4 cached free blocks, A's
  // older. C needs 4 new blocks: the 2 never-used blocks go first, then A's, so B stays cached.
  KVCacheManager m({6, 4, true});
  auto a = tokens_from(10, 8, 100);
  auto b = tokens_from(11, 8, 100);
  auto c = tokens_from(12, 16, 100);
  ASSERT_NE(m.allocate_slots({1, a, 0, 0, false}, 8), nullptr);
  ASSERT_NE(m.allocate_slots({2, b, 0, 0, false}, 8), nullptr);
  m.free(1);
  m.free(2);
  ASSERT_NE(m.allocate_slots({3, c, 0, 0, false}, 16), nullptr);
  m.free(3);
  auto a2 = a;
  a2.push_back(1);
  auto b2 = b;
  b2.push_back(1);
  EXPECT_EQ(m.get_computed_blocks({4, a2, 0, 0, false}).num_computed_tokens, 0);
  EXPECT_EQ(m.get_computed_blocks({5, b2, 0, 0, false}).num_computed_tokens, 8);
}

TEST(PrefixCache, PreemptedRequestResumesFromItsOwnCachedBlocks) {
  // Recompute after preemption is cheap with prefix caching: the victim's full blocks stay
  // cached (evictable) and it hits them when it is scheduled again.
  SchedulerConfig config;
  config.max_model_len = 64;
  config.max_num_batched_tokens = 64;
  auto s = Scheduler::create(config, {16, 4, true});
  ASSERT_TRUE(s.has_value());
  Scheduler& sched = **s;
  ASSERT_TRUE(sched.add_request(make(1, tokens_from(20, 20, 100), 30)).is_ok());
  ASSERT_TRUE(sched.add_request(make(2, tokens_from(21, 20, 100), 30)).is_ok());
  bool saw_resume_hit = false;
  while (sched.has_unfinished_requests()) {
    SchedulerOutput out = sched.schedule();
    for (const auto& r : out.scheduled) {
      if (r.is_new && r.request->num_preemptions > 0 && r.num_computed_tokens > 0)
        saw_resume_hit = true;
    }
    ModelRunnerOutput mo;
    for (const auto& r : out.scheduled)
      mo.sampled_token_ids.push_back(r.needs_sample ? 3 : -1);
    ASSERT_TRUE(sched.update_from_output(out, mo).has_value());
    ASSERT_TRUE(sched.check_invariants().is_ok());
  }
  EXPECT_GT(sched.stats().num_preemptions, 0u);
  EXPECT_TRUE(saw_resume_hit);
}

}  // namespace
}  // namespace locus
