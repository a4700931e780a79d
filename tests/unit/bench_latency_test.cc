// The decode roofline arithmetic on the standard qwen3-30b-a3b shape (numbers worked out by
// hand from its config), and `bench latency`'s harness end to end on a fixture model on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "bench/latency.h"
#include "bench/roofline.h"
#include "bench/throughput.h"
#include "io/model_config.h"
#include "loadgen/random_dataset.h"

namespace locus {
namespace {

const std::filesystem::path kFixtures = LOCUS_TEST_DATA_DIR;

TEST(Roofline, ExpectedActiveExperts) {
  EXPECT_DOUBLE_EQ(bench::expected_active_experts(128, 8, 1), 8.0);
  // Two tokens: 8 + 8 * (120/128) distinct on average.
  EXPECT_NEAR(bench::expected_active_experts(128, 8, 2), 8.0 + 8.0 * 120.0 / 128.0, 1e-9);
  EXPECT_NEAR(bench::expected_active_experts(128, 8, 4096), 128.0, 1e-6);
  EXPECT_EQ(bench::expected_active_experts(0, 8, 4), 0.0);
}

TEST(Roofline, Qwen3_30B_A3B_DecodeBytes) {
  auto config = load_model_config(kFixtures / "configs" / "qwen3-30b-a3b");
  ASSERT_TRUE(config.has_value()) << config.status().to_string();
  auto b1 = bench::decode_step_bytes(*config, 1, 1000);
  ASSERT_TRUE(b1.has_value()) << b1.status().to_string();
  // 48 layers x 8 active experts x (gate + up + down) 2048 x 768, bf16.
  EXPECT_DOUBLE_EQ(b1->expert_weight_bytes, 48.0 * 8 * 3 * 2048 * 768 * 2);
  // Per layer: q 4096x2048, k and v 512x2048, o 2048x4096, router 128x2048, two 2048 norms and
  // q/k norms of 128; plus the final norm and the untied lm_head 151936 x 2048.
  const double layer = 4096.0 * 2048 * 2 + 512.0 * 2048 * 2 + 128.0 * 2048 + 2 * 2048 + 2 * 128;
  EXPECT_DOUBLE_EQ(b1->dense_weight_bytes, (48 * layer + 2048 + 151936.0 * 2048) * 2);
  // KV: 4 kv heads x (128 + 128) x 48 layers x 1000 tokens, bf16.
  EXPECT_DOUBLE_EQ(b1->kv_bytes, 4.0 * 256 * 48 * 1000 * 2);
  auto b64 = bench::decode_step_bytes(*config, 64, 1000);
  ASSERT_TRUE(b64.has_value());
  EXPECT_GT(b64->expected_active_experts, 124.0);
  EXPECT_LT(b64->expected_active_experts, 128.0);
  EXPECT_DOUBLE_EQ(b64->kv_bytes, 64 * b1->kv_bytes);
}

TEST(BenchLatency, Percentiles) {
  const auto p = bench::percentiles({4, 1, 3, 2, 5});
  EXPECT_DOUBLE_EQ(p.mean, 3.0);
  EXPECT_DOUBLE_EQ(p.p50, 3.0);
  EXPECT_DOUBLE_EQ(p.p90, 4.6);
}

TEST(BenchLatency, RunsOnAFixtureModel) {
  ModelEngineOptions o;
  o.model_dir = kFixtures / "models" / "qwen3-moe";
  o.load_tokenizer = false;
  o.engine.scheduler.max_num_seqs = 4;
  o.engine.scheduler.max_model_len = 64;
  auto me = open_model_engine(o);
  ASSERT_TRUE(me.has_value()) << me.status().to_string();
  bench::LatencyOptions lo;
  lo.input_len = 20;
  lo.output_len = 6;
  lo.iters = 2;
  lo.warmup_iters = 1;
  for (int b : {1, 3}) {
    auto r = bench::run_latency(*me, lo, b);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->batch_size, b);
    EXPECT_GT(r->ttft_s.p50, 0.0);
    EXPECT_GT(r->tpot_s.p50, 0.0);
    EXPECT_GT(r->steady_tpot_s.p50, 0.0);
    EXPECT_GE(r->batch_latency_s.p50, r->ttft_s.p50);
    EXPECT_GT(r->output_tokens_per_s, 0.0);
    // The CPU records no graphs; every step of the two measured iterations ran eagerly.
    EXPECT_EQ(r->graph_steps, 0);
    EXPECT_GE(r->eager_steps, 2 * lo.output_len);
    EXPECT_EQ(r->concurrent, b);  // every request of the batch decoded together
  }
  // Six requests with room for four run in two waves: the steady phase is the second wave's.
  auto waves = bench::run_latency(*me, lo, 6);
  ASSERT_TRUE(waves.has_value()) << waves.status().to_string();
  EXPECT_GE(waves->concurrent, 1);
  EXPECT_LE(waves->concurrent, 4);
  me->engine->shutdown();
}

// bench throughput: every request runs to its drawn length (ignore_eos), the counts are read
// from the outputs, and too-long requests are refused before anything is sent.
TEST(BenchThroughput, CountsWhatTheRequestsProduced) {
  ModelEngineOptions o;
  o.model_dir = kFixtures / "models" / "qwen3-moe";
  o.load_tokenizer = false;
  o.engine.scheduler.max_num_seqs = 8;
  o.engine.scheduler.max_model_len = 64;
  auto me = open_model_engine(o);
  ASSERT_TRUE(me.has_value()) << me.status().to_string();
  bench::ThroughputOptions to;
  to.num_prompts = 12;
  to.input_len = 10;
  to.output_len = 5;
  auto r = bench::run_throughput(*me, to);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->num_requests, 12);
  EXPECT_EQ(r->prompt_tokens, 120);
  EXPECT_EQ(r->output_tokens, 60);
  EXPECT_GT(r->elapsed_s, 0.0);
  EXPECT_NEAR(r->output_tokens_per_s * r->elapsed_s, 60.0, 1e-6);
  EXPECT_NEAR(r->total_tokens_per_s * r->elapsed_s, 180.0, 1e-6);

  to.range_ratio = 0.5;  // lengths 5..15 in, 3..8 out: the totals are the drawn lengths
  auto varied = bench::run_throughput(*me, to);
  ASSERT_TRUE(varied.has_value()) << varied.status().to_string();
  loadgen::RandomDatasetOptions ro;
  ro.num_prompts = 12;
  ro.input_len = 10;
  ro.output_len = 5;
  ro.range_ratio = 0.5;
  ro.id_low = 1;
  ro.id_high = static_cast<int32_t>(me->config.vocab_size);
  int64_t want_in = 0, want_out = 0;
  for (const auto& req : loadgen::random_dataset(ro)) {
    want_in += static_cast<int64_t>(req.prompt_ids.size());
    want_out += req.output_len;
  }
  EXPECT_EQ(varied->prompt_tokens, want_in);
  EXPECT_EQ(varied->output_tokens, want_out);

  to.range_ratio = 0;
  to.input_len = 60;  // 60 + 5 > max_model_len 64
  auto too_long = bench::run_throughput(*me, to);
  ASSERT_FALSE(too_long.has_value());
  EXPECT_NE(too_long.status().message().find("exceeds --max-model-len 64"), std::string::npos)
      << too_long.status().message();
  me->engine->shutdown();
}

}  // namespace
}  // namespace locus
