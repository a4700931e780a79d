// Batch invariance on the fake model: every request's output is the same run alone or among 32
// others — with chunked prefill (tiny token budget), with preemption (tiny KV pool), with
// prefix-cache hits, under the priority policy, and for seeded random sampling too. The fake
// model reads each history back through the block tables, so any scheduler or KV bug that
// mixes up blocks, slots, hits or recomputation changes some output.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "engine/engine_core.h"
#include "engine/fake_model.h"

namespace locus {
namespace {

constexpr int kVocab = 64;

FakeModelConfig fake_config() {
  FakeModelConfig fm;
  fm.vocab_size = kVocab;
  fm.block_size = 4;
  return fm;
}

EngineConfig roomy_config() {
  EngineConfig c;
  c.scheduler.max_model_len = 128;
  c.scheduler.max_num_batched_tokens = 512;
  c.scheduler.max_num_seqs = 64;
  c.num_kv_blocks = 2048;
  c.eos_token_id = 0;
  c.seed = 77;
  return c;
}

// 33 requests: #0 is the probe; the others vary prompt length, output length, sampling and
// priority, and a third of them share a prefix with the probe (so prefix hits happen).
std::vector<EngineCoreRequest> workload(uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<int32_t> shared;
  for (int i = 0; i < 24; ++i)
    shared.push_back(uniform(1, kVocab - 1));
  std::vector<EngineCoreRequest> reqs;
  for (int i = 0; i < 33; ++i) {
    EngineCoreRequest r;
    r.request_id = static_cast<RequestId>(100 + i);
    if (i == 0 || i % 3 == 0) r.prompt_token_ids = shared;
    for (int k = 0; k < uniform(1, 40); ++k)
      r.prompt_token_ids.push_back(uniform(1, kVocab - 1));
    r.params.max_tokens = i == 0 ? 40 : uniform(1, 48);
    r.params.ignore_eos = i == 0;  // the probe always runs its full 40 tokens
    switch (i % 4) {
      case 0:
        r.params.temperature = 0.0f;
        break;
      case 1:
        r.params.temperature = 0.8f;
        r.params.top_p = 0.9f;
        r.params.seed = static_cast<uint64_t>(uniform(0, 1000));
        break;
      case 2:
        r.params.temperature = 0.0f;
        r.params.repetition_penalty = 1.3f;
        r.params.frequency_penalty = 0.5f;
        break;
      default:
        r.params.temperature = 1.0f;
        r.params.top_k = 8;
        r.params.min_tokens = 3;
        r.params.seed = static_cast<uint64_t>(i);
        break;
    }
    r.priority = uniform(0, 2);
    r.arrival_time = i;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

struct RunResult {
  std::map<RequestId, std::vector<int32_t>> tokens;
  SchedulerStats stats;
};

// Runs requests through one EngineCore. Requests are added in waves so batch composition
// changes while others are mid-flight.
RunResult run(const EngineConfig& config, const std::vector<EngineCoreRequest>& reqs) {
  RunResult result;
  auto core = EngineCore::create(config, std::make_unique<FakeModel>(fake_config()));
  EXPECT_TRUE(core.has_value()) << core.error().to_string();
  if (!core) return result;
  size_t next = 0;
  int step = 0;
  while (next < reqs.size() || (*core)->has_unfinished_requests()) {
    for (int k = 0; k < 4 && next < reqs.size(); ++k) {
      EXPECT_TRUE((*core)->add_request(reqs[next++]).is_ok());
    }
    auto outs = (*core)->step();
    EXPECT_TRUE(outs.has_value()) << outs.error().to_string();
    if (!outs) break;
    for (const auto& o : *outs) {
      auto& t = result.tokens[o.request_id];
      t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
    if (++step > 100000) {
      ADD_FAILURE() << "engine did not finish";
      break;
    }
  }
  result.stats = (*core)->stats();
  EXPECT_EQ((*core)->scheduler().kv_cache_manager().num_free_blocks(), (*core)->num_kv_blocks());
  return result;
}

// Every request's output run alone, in a fresh engine with roomy limits.
std::map<RequestId, std::vector<int32_t>> alone_outputs(
    const std::vector<EngineCoreRequest>& reqs) {
  std::map<RequestId, std::vector<int32_t>> out;
  for (const auto& r : reqs) {
    EngineConfig c = roomy_config();
    c.enable_prefix_caching = false;
    auto res = run(c, {r});
    out[r.request_id] = res.tokens[r.request_id];
  }
  return out;
}

class BatchInvariance : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    reqs_ = new std::vector<EngineCoreRequest>(workload(5));
    alone_ = new std::map<RequestId, std::vector<int32_t>>(alone_outputs(*reqs_));
  }
  static void TearDownTestSuite() {
    delete reqs_;
    delete alone_;
  }
  void expect_all_invariant(const RunResult& batched) {
    ASSERT_EQ(batched.tokens.size(), reqs_->size());
    for (const auto& [id, tokens] : *alone_) {
      EXPECT_EQ(batched.tokens.at(id), tokens) << "request " << id;
    }
    EXPECT_EQ(alone_->at(100).size(), 40u);  // the probe ran its full length
  }
  static std::vector<EngineCoreRequest>* reqs_;
  static std::map<RequestId, std::vector<int32_t>>* alone_;
};
std::vector<EngineCoreRequest>* BatchInvariance::reqs_ = nullptr;
std::map<RequestId, std::vector<int32_t>>* BatchInvariance::alone_ = nullptr;

TEST_F(BatchInvariance, AmongThirtyTwoOthers) {
  expect_all_invariant(run(roomy_config(), *reqs_));
}

TEST_F(BatchInvariance, WithChunkedPrefill) {
  EngineConfig c = roomy_config();
  c.scheduler.max_num_batched_tokens = 7;  // every prompt is split into chunks
  expect_all_invariant(run(c, *reqs_));
}

TEST_F(BatchInvariance, WithPreemption) {
  EngineConfig c = roomy_config();
  c.num_kv_blocks = 40;  // 160 slots for 33 requests of up to ~110 tokens
  c.enable_prefix_caching = false;
  RunResult r = run(c, *reqs_);
  expect_all_invariant(r);
  EXPECT_GT(r.stats.num_preemptions, 0u);
}

TEST_F(BatchInvariance, WithPrefixHits) {
  EngineConfig c = roomy_config();
  RunResult r = run(c, *reqs_);
  expect_all_invariant(r);
  EXPECT_GT(r.stats.prefix_cache.hits, 0u);
}

TEST_F(BatchInvariance, WithEverythingAtOnceUnderThePriorityPolicy) {
  EngineConfig c = roomy_config();
  c.scheduler.policy = SchedulingPolicy::kPriority;
  c.scheduler.max_num_batched_tokens = 11;
  c.scheduler.max_num_seqs = 9;
  c.num_kv_blocks = 36;
  RunResult r = run(c, *reqs_);
  expect_all_invariant(r);
  EXPECT_GT(r.stats.num_preemptions, 0u);
  EXPECT_GT(r.stats.prefix_cache.hits, 0u);
}

TEST_F(BatchInvariance, SeededSamplingIsReproducibleAcrossCompositions) {
  // Requests 1 and 3 mod 4 sample at temperature > 0 with a seed: covered above; here check
  // they really are random (not all greedy-equal) so the invariance means something.
  int differ = 0;
  for (const auto& r : *reqs_) {
    if (r.params.is_greedy()) continue;
    EngineCoreRequest g = r;
    g.params.temperature = 0.0f;
    auto greedy = run(roomy_config(), {g});
    differ += greedy.tokens[r.request_id] != alone_->at(r.request_id) ? 1 : 0;
  }
  EXPECT_GT(differ, 8);
}

}  // namespace
}  // namespace locus
