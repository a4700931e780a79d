// The data-parallel balancer: a prompt that shares a cached prefix goes where that prefix was
// sent; unrelated prompts go to the least loaded replica; a replica far busier than the others
// loses its prefix advantage; salts keep tenants apart; the record forgets beyond its size.
#include "engine/dp_balancer.h"

#include <gtest/gtest.h>

#include <vector>

namespace locus {
namespace {

std::vector<int32_t> prompt(int32_t base, int length) {
  std::vector<int32_t> p;
  for (int i = 0; i < length; ++i)
    p.push_back(base + i);
  return p;
}

TEST(PrefixAwareBalancer, SharedPrefixFollowsItsReplica) {
  PrefixAwareBalancer b(3, 4, 1000);
  const auto system = prompt(1000, 16);  // 4 full blocks
  auto a = system;
  a.push_back(7);
  // Nothing cached anywhere: the least loaded replica (ties: the first).
  EXPECT_EQ(b.route(a, "", std::vector<int>{2, 1, 3}), 1);
  EXPECT_EQ(b.cached_blocks(1, a, ""), 4);
  EXPECT_EQ(b.cached_blocks(0, a, ""), 0);
  // The same system prompt with another question: replica 1 holds the prefix, even when it is
  // a little busier.
  auto c = system;
  c.insert(c.end(), {9, 9, 9, 9, 9});
  EXPECT_EQ(b.route(c, "", std::vector<int>{0, 5, 0}), 1);
  // An unrelated prompt goes to the least loaded replica.
  EXPECT_EQ(b.route(prompt(5000, 16), "", std::vector<int>{3, 5, 0}), 2);
}

TEST(PrefixAwareBalancer, ImbalanceOverridesThePrefix) {
  BalancerOptions o;
  o.abs_threshold = 8;
  o.rel_threshold = 1.5;
  PrefixAwareBalancer strict(2, 4, 1000, o);
  const auto p = prompt(1, 12);
  EXPECT_EQ(strict.route(p, "", std::vector<int>{0, 0}), 0);
  // Within the thresholds the prefix wins.
  EXPECT_EQ(strict.route(p, "", std::vector<int>{8, 1}), 0);
  // Replica 0 holds the prefix but has 20 more requests (> 8 and > 1.5x): replica 1 takes it.
  EXPECT_EQ(strict.route(p, "", std::vector<int>{21, 1}), 1);
}

TEST(PrefixAwareBalancer, SaltsDoNotShare) {
  PrefixAwareBalancer b(2, 4, 1000);
  const auto p = prompt(1, 12);
  EXPECT_EQ(b.route(p, "tenant-a", std::vector<int>{0, 0}), 0);
  EXPECT_EQ(b.cached_blocks(0, p, "tenant-a"), 3);
  EXPECT_EQ(b.cached_blocks(0, p, "tenant-b"), 0);
  // tenant-b's equal prompt is unrelated: the less loaded replica.
  EXPECT_EQ(b.route(p, "tenant-b", std::vector<int>{1, 0}), 1);
}

TEST(PrefixAwareBalancer, RecordForgetsTheLeastRecentBlocks) {
  PrefixAwareBalancer b(1, 2, 4);          // 4 blocks remembered
  const auto old_prompt = prompt(100, 4);  // 2 blocks
  b.route(old_prompt, "", std::vector<int>{0});
  b.route(prompt(200, 4), "", std::vector<int>{0});
  EXPECT_EQ(b.cached_blocks(0, old_prompt, ""), 2);
  b.route(prompt(300, 4), "", std::vector<int>{0});  // evicts old_prompt's blocks
  EXPECT_EQ(b.cached_blocks(0, old_prompt, ""), 0);
  EXPECT_EQ(b.cached_blocks(0, prompt(300, 4), ""), 2);
  // Partial blocks are not hashed.
  EXPECT_EQ(b.cached_blocks(0, prompt(300, 3), ""), 1);
}

}  // namespace
}  // namespace locus
