// The whole engine with --tensor-parallel-size on the CPU: ParallelModelRunner drives one
// thread per rank through the in-process communicator, and the engine's greedy output equals
// transformers' (the fixtures' goldens) with the layers split or the experts spread. Flags that
// cannot run yet fail with a message that says what is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/data_parallel_engine.h"
#include "engine/lockstep_runner.h"
#include "engine/model_engine.h"
#include "engine/parallel_model_runner.h"
#include "unit/engine_test_util.h"
#include "unit/forward_test_util.h"

namespace locus {
namespace {

std::filesystem::path model_dir(const std::string& name) {
  return std::filesystem::path(LOCUS_TEST_DATA_DIR) / "models" / name;
}

// The fixture's golden prompts and greedy continuations.
testing::Goldens goldens(const std::string& fixture) {
  return testing::load_goldens(model_dir(fixture));
}

SamplingParams greedy_for(const testing::Goldens& g) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = static_cast<int>(g.greedy[0].size());
  greedy.ignore_eos = true;
  return greedy;
}

ModelEngineOptions options(const std::string& name, int tp, bool ep) {
  ModelEngineOptions o = testing::cpu_engine_options(name);
  o.tensor_parallel_size = tp;
  o.enable_expert_parallel = ep;
  return o;
}

struct Param {
  std::string fixture;
  int tp;
  bool ep;
};

class EngineParallel : public ::testing::TestWithParam<Param> {};

TEST_P(EngineParallel, GreedyMatchesTransformers) {
  const Param p = GetParam();
  const testing::Goldens g = goldens(p.fixture);
  ASSERT_FALSE(g.prompts.empty());
  auto me = open_model_engine(options(p.fixture, p.tp, p.ep));
  ASSERT_TRUE(me.has_value()) << me.status().to_string();
  EXPECT_EQ(me->tensor_parallel_size, p.tp);
  auto results = me->engine->generate(g.prompts, greedy_for(g));
  ASSERT_TRUE(results.has_value()) << results.status().to_string();
  for (size_t i = 0; i < g.prompts.size(); ++i) {
    ASSERT_EQ((*results)[i].completions.size(), 1u);
    EXPECT_EQ((*results)[i].completions[0].token_ids, g.greedy[i]) << "prompt " << i;
  }
  // Every step ran through rank 0's runner (and so on every rank).
  EXPECT_GT(me->runner->eager_steps(), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineParallel,
                         ::testing::Values(Param{"qwen3-moe", 2, false},
                                           Param{"qwen3-moe", 4, true},
                                           Param{"deepseek-v3", 2, false},
                                           Param{"deepseek-v3", 2, true}),
                         [](const ::testing::TestParamInfo<Param>& param_info) {
                           std::string s = param_info.param.fixture + "_tp" +
                                           std::to_string(param_info.param.tp) +
                                           (param_info.param.ep ? "_ep" : "");
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

// --data-parallel-size 2 (each replica tensor-parallel in the second case): the same greedy
// tokens, both replicas serve, and a request with the same prefix follows its replica.
TEST(EngineDataParallel, ReplicasServeAndAgree) {
  for (int tp : {1, 2}) {
    const std::string fixture = "qwen3-moe";
    const testing::Goldens g = goldens(fixture);
    const auto& prompts = g.prompts;
    const auto& want = g.greedy;
    ASSERT_FALSE(prompts.empty());
    const auto n = static_cast<int>(prompts.size());
    ModelEngineOptions o = options(fixture, tp, false);
    o.data_parallel_size = 2;
    auto me = open_model_engine(o);
    ASSERT_TRUE(me.has_value()) << me.status().to_string();
    EXPECT_EQ(me->data_parallel_size, 2);
    auto* dp = dynamic_cast<DataParallelEngine*>(me->engine.get());
    ASSERT_NE(dp, nullptr);
    const SamplingParams greedy = greedy_for(g);
    auto results = me->engine->generate(prompts, greedy);
    ASSERT_TRUE(results.has_value()) << results.status().to_string();
    for (int i = 0; i < n; ++i)
      EXPECT_EQ((*results)[i].completions[0].token_ids, want[i]) << "tp " << tp << " prompt " << i;
    // Both replicas took requests (distinct prompts go to the less loaded one).
    EXPECT_GT(dp->replica(0).stats().num_steps, 0u);
    EXPECT_GT(dp->replica(1).stats().num_steps, 0u);
    EXPECT_EQ(me->engine->stats().num_steps,
              dp->replica(0).stats().num_steps + dp->replica(1).stats().num_steps);

    // A request that extends prompt 0 lands where prompt 0 went: that replica's prefix cache
    // answers its first blocks.
    auto longer = prompts[0];
    longer.insert(longer.end(), want[0].begin(), want[0].end());
    const uint64_t hits_before = me->engine->stats().scheduler.prefix_cache.hits;
    SamplingParams one = greedy;
    one.max_tokens = 1;
    auto again = me->engine->generate({longer}, one);
    ASSERT_TRUE(again.has_value()) << again.status().to_string();
    EXPECT_GE(me->engine->stats().scheduler.prefix_cache.hits - hits_before,
              static_cast<uint64_t>(prompts[0].size() / 4 * 4))
        << "tp " << tp;

    // Aborting reaches the replica that holds the request.
    SamplingParams slow = greedy;
    slow.max_tokens = 100;
    auto stream = me->engine->add_request(prompts[1], slow);
    ASSERT_TRUE(stream.has_value()) << stream.status().to_string();
    me->engine->abort((*stream)->request_id());
    auto aborted = (*stream)->collect();
    ASSERT_TRUE(aborted.has_value()) << aborted.status().to_string();
    EXPECT_EQ(aborted->completions[0].finish_reason, FinishReason::kAbort);
    EXPECT_TRUE(me->engine->health().is_ok());
  }
}

// DP attention + EP MoE through the engine: two replicas, each with half of the experts, step
// together (an idle replica runs dummy steps so that the MoE collectives always pair up), with
// both token exchanges. The goldens come out, and a lone request finishes while the other
// replica has nothing to do.
TEST(EngineDataParallel, SharedExpertsStepTogether) {
  struct Case {
    std::string fixture;
    std::string all2all;
    int tp = 1;  // tensor-parallel ranks inside each replica
  };
  for (const Case& c :
       {Case{"qwen3-moe", "auto"}, Case{"deepseek-v3", "auto"}, Case{"qwen3-moe", "naive"},
        Case{"deepseek-v3", "naive"}, Case{"qwen3-moe", "low_latency"},
        Case{"qwen3-moe", "auto", 2}, Case{"deepseek-v3", "low_latency", 2}}) {
    const std::string where =
        c.fixture + " --all2all-backend " + c.all2all + " -tp " + std::to_string(c.tp);
    const testing::Goldens g = goldens(c.fixture);
    ASSERT_GE(g.prompts.size(), 3u);
    ModelEngineOptions o = options(c.fixture, c.tp, true);
    o.data_parallel_size = 2;
    o.all2all_backend = c.all2all;
    auto me = open_model_engine(o);
    ASSERT_TRUE(me.has_value()) << me.status().to_string();
    auto* dp = dynamic_cast<DataParallelEngine*>(me->engine.get());
    ASSERT_NE(dp, nullptr);
    const SamplingParams greedy = greedy_for(g);
    auto results = me->engine->generate(g.prompts, greedy);
    ASSERT_TRUE(results.has_value()) << results.status().to_string();
    for (size_t i = 0; i < g.prompts.size(); ++i) {
      EXPECT_EQ((*results)[i].completions[0].token_ids, g.greedy[i]) << where << " prompt " << i;
    }
    EXPECT_GT(dp->replica(0).stats().num_steps, 0u);
    EXPECT_GT(dp->replica(1).stats().num_steps, 0u);

    auto alone = me->engine->generate({g.prompts[2]}, greedy);
    ASSERT_TRUE(alone.has_value()) << alone.status().to_string();
    EXPECT_EQ((*alone)[0].completions[0].token_ids, g.greedy[2]) << where;
    EXPECT_TRUE(me->engine->health().is_ok());
  }
}

// The per-step agreement on the most tokens (what the MoE exchange pads to): each replica
// learns the maximum of the step it asked about, however far ahead of the others it runs, and a
// stopped group releases a waiting replica.
TEST(LockstepGroup, AgreesOnEachStepsMostTokens) {
  constexpr int kReplicas = 3;
  constexpr uint64_t kSteps = 50;
  auto group = std::make_shared<LockstepGroup>(kReplicas);
  std::vector<std::vector<int64_t>> got(kReplicas);
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r) {
    threads.emplace_back([&, r] {
      for (uint64_t step = 1; step <= kSteps; ++step)
        got[static_cast<size_t>(r)].push_back(group->max_tokens(
            step, static_cast<int64_t>((step * 7 + static_cast<uint64_t>(r) * 13) % 17 + 1)));
    });
  }
  for (auto& t : threads)
    t.join();
  for (uint64_t step = 1; step <= kSteps; ++step) {
    int64_t want = 0;
    for (int r = 0; r < kReplicas; ++r)
      want = std::max<int64_t>(
          want, static_cast<int64_t>((step * 7 + static_cast<uint64_t>(r) * 13) % 17 + 1));
    for (int r = 0; r < kReplicas; ++r)
      EXPECT_EQ(got[static_cast<size_t>(r)][step - 1], want) << "replica " << r << " step " << step;
  }

  int64_t released = -1;
  std::thread waiter([&] { released = group->max_tokens(kSteps + 1, 4); });
  group->stop();
  waiter.join();
  EXPECT_EQ(released, 0);
}

TEST(EngineParallelOptions, WhatCannotRunSaysWhy) {
  auto expect_error = [](ModelEngineOptions o, ErrorCode code, const std::string& text) {
    auto me = open_model_engine(o);
    ASSERT_FALSE(me.has_value()) << text;
    EXPECT_EQ(me.status().code(), code) << me.status().to_string();
    EXPECT_NE(me.status().message().find(text), std::string::npos) << me.status().message();
  };
  // 8 experts cannot spread over 4 replicas x 4 ranks.
  ModelEngineOptions dp_ep = options("qwen3-moe", 4, true);
  dp_ep.data_parallel_size = 4;
  expect_error(dp_ep, ErrorCode::kInvalidArgument,
               "routed experts cannot be spread over 16 ranks (4 data-parallel x 4");

  ModelEngineOptions tp_ll = options("qwen3-moe", 2, true);
  tp_ll.all2all_backend = "low_latency";
  expect_error(tp_ll, ErrorCode::kInvalidArgument,
               "--all2all-backend low_latency moves tokens between data-parallel ranks");

  ModelEngineOptions bad = options("qwen3-moe", 2, true);
  bad.all2all_backend = "deepep";
  expect_error(bad, ErrorCode::kInvalidArgument, "--all2all-backend 'deepep': choose");

  // Tensor-parallel ranks see every token: there is nothing to send between them.
  ModelEngineOptions tp_naive = options("qwen3-moe", 2, true);
  tp_naive.all2all_backend = "naive";
  expect_error(tp_naive, ErrorCode::kInvalidArgument,
               "--all2all-backend naive moves tokens between data-parallel ranks");

  // kimi-k2's fixture has 2 attention heads: 4 ranks cannot split them.
  expect_error(options("kimi-k2", 4, false), ErrorCode::kInvalidArgument,
               "num_attention_heads 2 does not split evenly over --tensor-parallel-size 4");

  ModelEngineOptions placement = options("qwen3-moe", 2, true);
  placement.expert_placement = "random";
  expect_error(placement, ErrorCode::kInvalidArgument, "--expert-placement-strategy 'random'");
}

}  // namespace
}  // namespace locus
