// The engine on real models: LLMEngine + scheduler + KV manager + LocalModelRunner + Model on
// the CPU backend, driven with the tiny golden checkpoints of tests/fixtures/models.
//  - Greedy output through the whole engine equals transformers' greedy tokens.
//  - Batch invariance: a probe request's greedy tokens are bit-identical alone and among 32
//    others, with chunked prefill, with preemption (a KV pool too small for everyone), and with
//    prefix-cache hits.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/model_engine.h"
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

struct EngineSetup {
  int block_size = 4;
  int max_num_batched_tokens = 2048;
  int max_num_seqs = 64;
  int num_kv_blocks = 4096;
  bool prefix_caching = true;
};

ModelEngine open(const std::string& name, const EngineSetup& s) {
  ModelEngineOptions o;
  o.model_dir = model_dir(name);
  o.load_tokenizer = false;
  o.cpu_batch_invariant = true;
  o.cpu_threads = 2;
  o.block_size = s.block_size;
  o.engine.scheduler.max_model_len = 128;
  o.engine.scheduler.max_num_batched_tokens = s.max_num_batched_tokens;
  o.engine.scheduler.max_num_seqs = s.max_num_seqs;
  o.engine.num_kv_blocks = s.num_kv_blocks;
  o.engine.enable_prefix_caching = s.prefix_caching;
  auto me = open_model_engine(o);
  EXPECT_TRUE(me.has_value()) << me.status().to_string();
  if (!me) std::abort();
  return std::move(*me);
}

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& param) {
  std::string s = param.param;
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

class EngineGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineGolden, GreedyMatchesTransformers) {
  const auto dir = model_dir(GetParam());
  auto golden = SafetensorsFile::open(dir / "golden.safetensors");
  ASSERT_TRUE(golden.has_value()) << golden.status().to_string();
  const int n = std::stoi(golden->metadata().at("num_prompts"));
  std::vector<std::vector<int32_t>> prompts, want;
  for (int i = 0; i < n; ++i) {
    prompts.push_back(read_ids(*golden, "prompt." + std::to_string(i)));
    want.push_back(read_ids(*golden, "greedy." + std::to_string(i)));
  }
  // Small steps so prompts are prefilled in chunks while others decode.
  EngineSetup setup;
  setup.max_num_batched_tokens = 16;
  ModelEngine me = open(GetParam(), setup);
  auto results = me.engine->generate(prompts, greedy(static_cast<int>(want[0].size())));
  ASSERT_TRUE(results.has_value()) << results.status().to_string();
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ((*results)[i].completions.size(), 1u);
    EXPECT_EQ((*results)[i].completions[0].token_ids, want[i]) << "prompt " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineGolden,
                         ::testing::Values("qwen3-moe", "mixtral", "glm4-moe", "minimax-m2",
                                           "deepseek-v3", "deepseek-v3-fp8", "kimi-k2",
                                           "deepseek-v2"),
                         test_name);

// The probe and 32 companions; a third of them start with the probe's first 12 tokens.
std::vector<std::vector<int32_t>> workload(int vocab, std::vector<int32_t>& probe) {
  std::mt19937 rng(1234);
  auto token = [&] { return std::uniform_int_distribution<int32_t>(1, vocab - 1)(rng); };
  probe.clear();
  for (int i = 0; i < 21; ++i)
    probe.push_back(token());
  std::vector<std::vector<int32_t>> others;
  for (int r = 0; r < 32; ++r) {
    std::vector<int32_t> p;
    if (r % 3 == 0) p.assign(probe.begin(), probe.begin() + 12);
    const int len = std::uniform_int_distribution<int>(1, 30)(rng);
    for (int i = 0; i < len; ++i)
      p.push_back(token());
    others.push_back(std::move(p));
  }
  return others;
}

class EngineInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineInvariance, ProbeIsBitIdenticalWhateverTheBatch) {
  constexpr int kTokens = 24;
  std::vector<int32_t> probe;
  std::vector<std::vector<int32_t>> others;
  std::vector<int32_t> alone;
  {
    ModelEngine me = open(GetParam(), EngineSetup{});
    others = workload(me.engine->vocab_size(), probe);
    auto r = me.engine->generate({probe}, greedy(kTokens));
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    alone = (*r)[0].completions[0].token_ids;
    ASSERT_EQ(alone.size(), static_cast<size_t>(kTokens));
  }

  uint64_t preemptions = 0;
  auto probe_among_others = [&](const EngineSetup& setup, bool warm_prefix) {
    ModelEngine me = open(GetParam(), setup);
    if (warm_prefix) {  // leaves the probe's blocks in the prefix cache
      auto warm = me.engine->generate({probe}, greedy(1));
      EXPECT_TRUE(warm.has_value());
    }
    std::vector<std::vector<int32_t>> batch = others;
    batch.insert(batch.begin() + 7, probe);
    auto r = me.engine->generate(batch, greedy(kTokens));
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    if (!r) return std::pair<std::vector<int32_t>, int>{};
    const auto& c = (*r)[7].completions[0];
    preemptions = me.engine->stats().scheduler.num_preemptions;
    return std::pair{c.token_ids, c.metrics.num_cached_tokens};
  };

  EngineSetup batched;
  EXPECT_EQ(probe_among_others(batched, false).first, alone) << "batched with 32 others";

  EngineSetup chunked;
  chunked.max_num_batched_tokens = 8;  // every prompt is prefilled in chunks of <= 8 tokens
  EXPECT_EQ(probe_among_others(chunked, false).first, alone) << "chunked prefill";

  EngineSetup tight;
  tight.num_kv_blocks = 40;  // 160 token slots for 33 growing sequences: preemption
  EXPECT_EQ(probe_among_others(tight, false).first, alone) << "with preemption";
  EXPECT_GT(preemptions, 0u) << "the tight pool should have forced preemptions";

  EngineSetup cached;
  auto [tokens, num_cached] = probe_among_others(cached, true);
  EXPECT_EQ(tokens, alone) << "with prefix-cache hits";
  EXPECT_GE(num_cached, 12) << "the probe's prompt should have been served from the cache";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineInvariance, ::testing::Values("qwen3-moe", "deepseek-v3"),
                         test_name);

}  // namespace
}  // namespace locus

namespace locus {
namespace {

// Plain draws go through the runner's sample_rows (the device path); asking for logprobs sends
// the same step to the host sampler. Both must give the same tokens for the same seed: a
// request's output cannot depend on which path sampled it.
TEST(EngineDeviceSampling, SameTokensAsTheHostSampler) {
  EngineSetup setup;
  ModelEngine me = open("qwen3-moe", setup);
  ASSERT_TRUE(me.runner->supports_device_sampling());
  std::vector<int32_t> probe;
  auto prompts = workload(static_cast<int>(me.config.vocab_size), probe);
  prompts.resize(6);
  for (int variant = 0; variant < 3; ++variant) {
    SamplingParams p;
    p.max_tokens = 12;
    p.ignore_eos = true;
    p.seed = 100 + variant;
    p.temperature = variant == 0 ? 1.0f : 0.7f;
    if (variant == 1) {
      p.top_k = 20;
      p.top_p = 0.9f;
    }
    if (variant == 2) p.min_p = 0.05f;
    const int64_t before = me.runner->device_sampled_steps();
    auto device = me.engine->generate(prompts, p);
    ASSERT_TRUE(device.has_value()) << device.status().to_string();
    const int64_t after = me.runner->device_sampled_steps();
    EXPECT_GE(after - before, 11);  // every decode step sampled on the backend
    SamplingParams with_logprobs = p;
    with_logprobs.logprobs = 1;
    auto host = me.engine->generate(prompts, with_logprobs);
    ASSERT_TRUE(host.has_value()) << host.status().to_string();
    EXPECT_EQ(me.runner->device_sampled_steps(), after);  // logprobs: the host sampler only
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ((*device)[i].completions[0].token_ids, (*host)[i].completions[0].token_ids)
          << "variant " << variant << " prompt " << i;
    }
  }
}

// --attention-backend / --moe-backend: auto resolves to the device's family; an explicit choice
// the device cannot run fails with a message naming the flag, before any weights load.
TEST(EngineKernelChoice, ResolvesAndRejects) {
  auto options = [](std::string attention, std::string moe) {
    ModelEngineOptions o;
    o.model_dir = model_dir("qwen3-moe");
    o.load_tokenizer = false;
    o.cpu_threads = 1;
    o.device = "cpu";
    o.engine.scheduler.max_model_len = 64;
    o.engine.num_kv_blocks = 64;
    o.attention_backend = std::move(attention);
    o.moe_backend = std::move(moe);
    return o;
  };
  auto me = open_model_engine(options("auto", "cpu"));
  ASSERT_TRUE(me.has_value()) << me.status().to_string();
  EXPECT_EQ(me->attention_backend, "cpu");
  EXPECT_EQ(me->moe_backend, "cpu");

  auto gpu_only = open_model_engine(options("auto", "cuda_grouped"));
  ASSERT_FALSE(gpu_only.has_value());
  EXPECT_EQ(gpu_only.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(gpu_only.status().message().find("--moe-backend cuda_grouped needs a GPU"),
            std::string::npos)
      << gpu_only.status().message();

  auto unknown = open_model_engine(options("flashinfer", "auto"));
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("--attention-backend flashinfer: choose auto, "
                                            "cuda_paged or cpu"),
            std::string::npos)
      << unknown.status().message();
}

}  // namespace
}  // namespace locus
