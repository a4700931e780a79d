// The whole engine on several GPUs, as `locus serve` opens it: tensor parallelism (with and
// without expert parallelism), data-parallel replicas, and DP attention + EP MoE with each
// --all2all-backend, against the same engine on one GPU. bf16 sums in another order flip
// near-tied choices of these tiny random models (cuda_model_gpu_test.cc), so greedy tokens must
// agree up to a near tie: at the first differing token, each run's token is in the other's top 5
// logprobs. A second pass without logprobs lets runners that sample on the GPU do so, and must
// give the first pass's tokens. SKIPPED with fewer GPUs than a case needs or without NCCL.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/device.h"
#include "engine/data_parallel_engine.h"
#include "engine/model_engine.h"
#include "unit/forward_test_util.h"

#ifdef LOCUS_HAS_CUDA
#include "backend/cuda/runtime/nccl_communicator.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA

TEST(GpuEngineParallel, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

struct Case {
  std::string fixture;
  int tp = 1;
  int dp = 1;
  bool ep = false;
  std::string all2all = "auto";
  bool tp_graphs = false;  // --experimental-tp-cuda-graphs
};

std::string label(const Case& c) {
  std::string s = c.fixture + "_tp" + std::to_string(c.tp) + "_dp" + std::to_string(c.dp) +
                  (c.ep ? "_ep_" + c.all2all : "") + (c.tp_graphs ? "_graphs" : "");
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

ModelEngineOptions options_for(const Case& c) {
  ModelEngineOptions o;
  o.model_dir = std::filesystem::path(LOCUS_TEST_DATA_DIR) / "models" / c.fixture;
  o.load_tokenizer = false;
  o.device = "cuda";
  o.gpu_memory_utilization = 0.2;
  o.block_size = 16;
  o.engine.scheduler.max_model_len = 256;
  o.engine.scheduler.max_num_batched_tokens = 64;  // prompts prefill in chunks beside decodes
  o.engine.scheduler.max_num_seqs = 16;
  o.tensor_parallel_size = c.tp;
  o.data_parallel_size = c.dp;
  o.enable_expert_parallel = c.ep;
  o.all2all_backend = c.all2all;
  o.tensor_parallel_cuda_graphs = c.tp_graphs;
  return o;
}

struct Generated {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<Logprobs>> logprobs;  // empty without logprobs
};

Generated generate(ModelEngine& me, const testing::Goldens& g, bool with_logprobs) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = static_cast<int>(g.greedy[0].size());
  greedy.ignore_eos = true;
  if (with_logprobs) greedy.logprobs = 5;
  Generated out;
  auto results = me.engine->generate(g.prompts, greedy);
  EXPECT_TRUE(results.has_value()) << results.status().to_string();
  if (!results) return out;
  for (const auto& r : *results) {
    out.tokens.push_back(r.completions[0].token_ids);
    out.logprobs.push_back(r.completions[0].logprobs);
  }
  return out;
}

bool in_top(const Logprobs& l, int32_t token) {
  return std::any_of(l.top.begin(), l.top.end(),
                     [&](const TokenLogprob& t) { return t.token_id == token; });
}

// `b`'s greedy tokens equal `a`'s up to a near tie: at the first difference, b's token is in
// a's top 5 (and a's in b's when b has logprobs).
void expect_near(const Generated& a, const Generated& b, const std::string& what) {
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    const auto& x = a.tokens[i];
    const auto& y = b.tokens[i];
    ASSERT_EQ(x.size(), y.size()) << what;
    const auto first =
        static_cast<size_t>(std::mismatch(x.begin(), x.end(), y.begin()).first - x.begin());
    if (first == x.size()) continue;
    const bool b_ok = b.logprobs[i].empty() || in_top(b.logprobs[i][first], x[first]);
    EXPECT_TRUE(in_top(a.logprobs[i][first], y[first]) && b_ok)
        << what << ", prompt " << i << ": tokens differ at step " << first << " beyond a near tie";
  }
}

class GpuEngineParallel : public ::testing::TestWithParam<Case> {};

TEST_P(GpuEngineParallel, GreedyMatchesOneGpu) {
  const Case c = GetParam();
  const int need = c.tp * c.dp;
  const DeviceReport report = query_devices();
  if (static_cast<int>(report.gpus.size()) < need) {
    GTEST_SKIP() << "needs " << need << " GPUs, found " << report.gpus.size();
  }
  auto version = NcclCommunicator::library_version();
  if (!version) GTEST_SKIP() << version.status().to_string();
  const testing::Goldens g =
      testing::load_goldens(std::filesystem::path(LOCUS_TEST_DATA_DIR) / "models" / c.fixture);
  ASSERT_GE(g.prompts.size(), 3u);

  Generated one;
  {
    auto me = open_model_engine(options_for(Case{c.fixture}));
    ASSERT_TRUE(me.has_value()) << me.status().to_string();
    one = generate(*me, g, true);
  }
  ASSERT_EQ(one.tokens.size(), g.prompts.size());

  auto me = open_model_engine(options_for(c));
  ASSERT_TRUE(me.has_value()) << me.status().to_string();
  const Generated many = generate(*me, g, true);
  ASSERT_EQ(many.tokens.size(), g.prompts.size());
  expect_near(one, many, "one GPU vs " + label(c));

  // Without logprobs the runner may sample on the GPU: the same greedy tokens up to a near tie
  // (requests may land on other replicas, in other batches).
  const Generated sampled = generate(*me, g, false);
  ASSERT_EQ(sampled.tokens.size(), g.prompts.size());
  expect_near(many, sampled, "host vs device sampling, " + label(c));

  if (c.dp > 1) {
    auto* dp = dynamic_cast<DataParallelEngine*>(me->engine.get());
    ASSERT_NE(dp, nullptr);
    EXPECT_GT(dp->replica(0).stats().num_steps, 0u);
    EXPECT_GT(dp->replica(1).stats().num_steps, 0u);
    // A lone request: with shared experts the idle replica runs dummy steps beside it.
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    greedy.max_tokens = 4;
    greedy.ignore_eos = true;
    auto alone = me->engine->generate({g.prompts[2]}, greedy);
    ASSERT_TRUE(alone.has_value()) << alone.status().to_string();
    EXPECT_EQ((*alone)[0].completions[0].token_ids.size(), 4u);
  }
  EXPECT_TRUE(me->engine->health().is_ok());
  std::printf("[engine-gpu] %s on %d GPUs, NCCL %s: greedy agrees with one GPU\n", label(c).c_str(),
              need, version->c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GpuEngineParallel,
    ::testing::Values(Case{"qwen3-moe", 2, 1, false}, Case{"qwen3-moe", 2, 1, false, "auto", true},
                      Case{"qwen3-moe", 2, 1, true}, Case{"deepseek-v3", 2, 1, true},
                      Case{"qwen3-moe", 1, 2, false}, Case{"qwen3-moe", 1, 2, true, "auto"},
                      Case{"qwen3-moe", 1, 2, true, "naive"},
                      Case{"qwen3-moe", 1, 2, true, "low_latency"},
                      Case{"deepseek-v3", 1, 2, true, "low_latency"}, Case{"qwen3-moe", 4, 1, true},
                      Case{"qwen3-moe", 1, 4, true, "naive"}),
    [](const ::testing::TestParamInfo<Case>& param_info) { return label(param_info.param); });

#endif

}  // namespace
}  // namespace locus
