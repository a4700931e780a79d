// Property test of the scheduler over the KV manager: thousands of random steps with adds,
// aborts, stop tokens, chunked prefill and preemption (tiny KV pool), under both policies and
// with prefix caching on and off. Every plan respects the limits, every block table covers
// its tokens, ref counts stay consistent, and at the end every block is back in the pool.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "sched/scheduler.h"

namespace locus {
namespace {

struct Scenario {
  SchedulingPolicy policy;
  bool caching;
  uint32_t seed;
};

// Returns the number of preemptions.
uint64_t run_scenario(const Scenario& sc, int num_steps) {
  SchedulerConfig c;
  c.max_model_len = 64;
  c.max_num_seqs = 6;
  c.max_num_batched_tokens = 24;
  c.policy = sc.policy;
  c.num_lookahead_tokens = sc.seed % 3 == 0 ? 2 : 0;
  constexpr int kBlockSize = 4;
  constexpr int kNumBlocks = 20;  // 80 slots: a few requests at most, so preemption is common
  auto created = Scheduler::create(c, {kNumBlocks, kBlockSize, sc.caching});
  EXPECT_TRUE(created.has_value());
  if (!created) return 0;
  Scheduler& s = **created;
  std::mt19937 rng(sc.seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::vector<int32_t>> prefixes(3);
  for (auto& p : prefixes) {
    for (int i = 0; i < uniform(0, 16); ++i)
      p.push_back(uniform(0, 30));
  }
  std::set<RequestId> live;
  RequestId next_id = 1;
  uint64_t finished = 0;

  for (int step = 0; step < num_steps; ++step) {
    if (uniform(0, 2) == 0) {
      EngineCoreRequest r;
      r.request_id = next_id++;
      r.prompt_token_ids = prefixes[static_cast<size_t>(uniform(0, 2))];
      for (int i = 0; i < uniform(1, 20); ++i)
        r.prompt_token_ids.push_back(uniform(0, 30));
      r.params.max_tokens = uniform(1, 30);
      r.params.stop_token_ids = {29};
      r.eos_token_id = 0;
      r.priority = uniform(0, 3);
      r.arrival_time = step;
      const RequestId id = r.request_id;
      if (s.add_request(std::move(r)).is_ok()) live.insert(id);
    }
    if (!live.empty() && uniform(0, 9) == 0) {
      auto it = live.begin();
      std::advance(it, uniform(0, static_cast<int>(live.size()) - 1));
      const std::vector<RequestId> ids = {*it};
      s.finish_requests(ids, RequestStatus::kFinishedAborted);
      live.erase(it);
    }
    SchedulerOutput out = s.schedule();
    EXPECT_LE(out.total_num_scheduled_tokens, c.max_num_batched_tokens);
    EXPECT_LE(static_cast<int>(out.scheduled.size()), c.max_num_seqs);
    std::set<RequestId> seen;
    int total = 0;
    for (const ScheduledRequest& r : out.scheduled) {
      EXPECT_TRUE(seen.insert(r.request->id).second) << "scheduled twice";
      EXPECT_GT(r.num_new_tokens, 0);
      const int end = r.num_computed_tokens + r.num_new_tokens;
      EXPECT_LE(end, r.request->num_tokens());
      EXPECT_GE(static_cast<int>(r.block_ids.size()) * kBlockSize, end);
      EXPECT_EQ(r.needs_sample, end == r.request->num_tokens());
      total += r.num_new_tokens;
    }
    EXPECT_EQ(total, out.total_num_scheduled_tokens);
    ModelRunnerOutput mo;
    for (const ScheduledRequest& r : out.scheduled) {
      mo.sampled_token_ids.push_back(r.needs_sample ? uniform(0, 30) : -1);
    }
    auto outs = s.update_from_output(out, mo);
    EXPECT_TRUE(outs.has_value());
    for (const EngineCoreOutput& o : *outs) {
      if (o.finished()) {
        live.erase(o.request_id);
        ++finished;
      }
    }
    Status inv = s.check_invariants();
    EXPECT_TRUE(inv.is_ok()) << "step " << step << ": " << inv.to_string();
  }
  const std::vector<RequestId> rest(live.begin(), live.end());
  s.finish_requests(rest, RequestStatus::kFinishedAborted);
  EXPECT_FALSE(s.has_unfinished_requests());
  EXPECT_EQ(s.kv_cache_manager().num_free_blocks(), kNumBlocks);
  EXPECT_EQ(s.kv_cache_manager().num_tracked_requests(), 0u);
  for (BlockId b = 0; b < kNumBlocks; ++b)
    EXPECT_EQ(s.kv_cache_manager().block_pool().ref_count(b), 0);
  EXPECT_GT(finished, 10u);
  return s.stats().num_preemptions;
}

TEST(SchedulerProperty, RandomWorkloadsNeverLeakBlocks) {
  uint64_t preemptions = 0;
  int scenarios_with_preemption = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    for (auto policy : {SchedulingPolicy::kFcfs, SchedulingPolicy::kPriority}) {
      for (bool caching : {true, false}) {
        SCOPED_TRACE(testing::Message() << "seed " << seed << " policy " << static_cast<int>(policy)
                                        << " caching " << caching);
        const uint64_t n = run_scenario({policy, caching, seed}, 400);
        preemptions += n;
        scenarios_with_preemption += n > 0 ? 1 : 0;
        if (testing::Test::HasFailure()) return;  // one scenario's failures are enough
      }
    }
  }
  // The pool must really run out, or the test proves little.
  EXPECT_GT(scenarios_with_preemption, 12) << preemptions << " preemptions";
}

}  // namespace
}  // namespace locus
