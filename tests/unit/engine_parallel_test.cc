// The whole engine with --tensor-parallel-size on the CPU: ParallelModelRunner drives one
// thread per rank through the in-process communicator, and the engine's greedy output equals
// transformers' (the fixtures' goldens) with the layers split or the experts spread. Flags that
// cannot run yet fail with a message that says what is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/model_engine.h"
#include "engine/parallel_model_runner.h"
#include "io/safetensors.h"

namespace locus {
namespace {

std::filesystem::path model_dir(const std::string& name) {
  return std::filesystem::path(LOCUS_TEST_DATA_DIR) / "models" / name;
}

std::vector<int32_t> read_ids(const SafetensorsFile& f, const std::string& name) {
  auto t = f.tensor(name);
  EXPECT_TRUE(t.has_value()) << name;
  if (!t) return {};
  const auto* p = static_cast<const int32_t*>(t->raw_data());
  return std::vector<int32_t>(p, p + t->numel());
}

ModelEngineOptions options(const std::string& name, int tp, bool ep) {
  ModelEngineOptions o;
  o.model_dir = model_dir(name);
  o.load_tokenizer = false;
  o.device = "cpu";
  o.cpu_threads = 2;
  o.block_size = 4;
  o.engine.scheduler.max_model_len = 128;
  o.engine.scheduler.max_num_batched_tokens = 16;  // prompts prefill in chunks beside decodes
  o.engine.scheduler.max_num_seqs = 16;
  o.engine.num_kv_blocks = 512;
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
  auto golden = SafetensorsFile::open(model_dir(p.fixture) / "golden.safetensors");
  ASSERT_TRUE(golden.has_value()) << golden.status().to_string();
  const int n = std::stoi(golden->metadata().at("num_prompts"));
  std::vector<std::vector<int32_t>> prompts, want;
  for (int i = 0; i < n; ++i) {
    prompts.push_back(read_ids(*golden, "prompt." + std::to_string(i)));
    want.push_back(read_ids(*golden, "greedy." + std::to_string(i)));
  }
  auto me = open_model_engine(options(p.fixture, p.tp, p.ep));
  ASSERT_TRUE(me.has_value()) << me.status().to_string();
  EXPECT_EQ(me->tensor_parallel_size, p.tp);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = static_cast<int>(want[0].size());
  greedy.ignore_eos = true;
  auto results = me->engine->generate(prompts, greedy);
  ASSERT_TRUE(results.has_value()) << results.status().to_string();
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ((*results)[i].completions.size(), 1u);
    EXPECT_EQ((*results)[i].completions[0].token_ids, want[i]) << "prompt " << i;
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

TEST(EngineParallelOptions, WhatCannotRunSaysWhy) {
  auto expect_error = [](ModelEngineOptions o, ErrorCode code, const std::string& text) {
    auto me = open_model_engine(o);
    ASSERT_FALSE(me.has_value()) << text;
    EXPECT_EQ(me.status().code(), code) << me.status().to_string();
    EXPECT_NE(me.status().message().find(text), std::string::npos) << me.status().message();
  };
  ModelEngineOptions dp = options("qwen3-moe", 1, false);
  dp.data_parallel_size = 2;
  expect_error(dp, ErrorCode::kUnsupported, "--data-parallel-size 2: data parallelism");

  ModelEngineOptions a2a = options("qwen3-moe", 2, true);
  a2a.all2all_backend = "low_latency";
  expect_error(a2a, ErrorCode::kUnsupported, "--all2all-backend low_latency is not built yet");

  ModelEngineOptions bad = options("qwen3-moe", 2, true);
  bad.all2all_backend = "deepep";
  expect_error(bad, ErrorCode::kInvalidArgument, "--all2all-backend deepep: choose");

  // kimi-k2's fixture has 2 attention heads: 4 ranks cannot split them.
  expect_error(options("kimi-k2", 4, false), ErrorCode::kInvalidArgument,
               "num_attention_heads 2 does not split evenly over --tensor-parallel-size 4");

  ModelEngineOptions placement = options("qwen3-moe", 2, true);
  placement.expert_placement = "random";
  expect_error(placement, ErrorCode::kInvalidArgument, "--expert-placement-strategy 'random'");
}

}  // namespace
}  // namespace locus
