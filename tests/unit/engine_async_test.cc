// Async scheduling (EngineConfig::async_scheduling) on the fake model, which draws plain rows
// itself like a GPU runner: every request gets exactly the tokens and finish reason the
// synchronous engine gives it, across arrivals, EOS and stop-token finishes (which drop a
// queued step), length limits, KV block boundaries, preemption, chunked prefill, host-sampled
// requests mixed in, and aborts that arrive while a step is queued.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "engine/engine_core.h"
#include "engine/fake_model.h"

namespace locus {
namespace {

constexpr int kVocab = 48;

FakeModelConfig fake_config(bool device_sampling = true) {
  FakeModelConfig fm;
  fm.vocab_size = kVocab;
  fm.block_size = 4;
  fm.device_sampling = device_sampling;
  return fm;
}

EngineConfig config(bool async) {
  EngineConfig c;
  c.scheduler.max_model_len = 160;
  c.scheduler.max_num_batched_tokens = 512;
  c.scheduler.max_num_seqs = 16;
  c.num_kv_blocks = 1024;
  c.eos_token_id = 0;
  c.seed = 5;
  c.async_scheduling = async;
  return c;
}

std::vector<EngineCoreRequest> workload(uint32_t seed, int count) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<EngineCoreRequest> reqs;
  for (int i = 0; i < count; ++i) {
    EngineCoreRequest r;
    r.request_id = static_cast<RequestId>(200 + i);
    for (int k = 0; k < uniform(1, 30); ++k)
      r.prompt_token_ids.push_back(uniform(1, kVocab - 1));
    r.params.max_tokens = uniform(1, 60);
    r.params.ignore_eos = i % 3 == 0;  // the others may stop on EOS (id 0) at any step
    if (i % 5 == 1) r.params.stop_token_ids = {7, 11};
    switch (i % 4) {
      case 0:
        r.params.temperature = 0.0f;
        break;
      case 1:
        r.params.temperature = 0.9f;
        r.params.top_p = 0.8f;
        r.params.seed = static_cast<uint64_t>(i);
        break;
      case 2:
        r.params.temperature = 1.0f;
        r.params.top_k = 6;
        // Host-sampled for its first tokens, then on the device.
        r.params.min_tokens = std::min(4, *r.params.max_tokens);
        break;
      default:
        // A penalty needs the host sampler: steps with this request run synchronously.
        r.params.temperature = 0.0f;
        if (i == 3) {
          r.params.repetition_penalty = 1.2f;
          r.params.max_tokens = 6;
        }
        break;
    }
    reqs.push_back(std::move(r));
  }
  return reqs;
}

struct RunResult {
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, FinishReason> finish;
  int64_t queued = 0;
  int64_t dropped = 0;
  int64_t fed = 0;
  uint64_t preemptions = 0;
};

// Adds the requests a few at a time (so batches change while others decode), aborting `abort`
// right after the call that brings its `abort_after`-th token.
RunResult run(const EngineConfig& c, const std::vector<EngineCoreRequest>& reqs,
              bool device_sampling = true, RequestId abort = 0, size_t abort_after = 0) {
  RunResult result;
  auto core = EngineCore::create(c, std::make_unique<FakeModel>(fake_config(device_sampling)));
  EXPECT_TRUE(core.has_value()) << core.error().to_string();
  if (!core) return result;
  size_t next = 0;
  bool aborted = false;
  for (int step = 0; next < reqs.size() || (*core)->has_unfinished_requests(); ++step) {
    if (step % 3 == 0) {
      for (int k = 0; k < 3 && next < reqs.size(); ++k)
        EXPECT_TRUE((*core)->add_request(reqs[next++]).is_ok());
    }
    auto outs = (*core)->step();
    EXPECT_TRUE(outs.has_value()) << outs.error().to_string();
    if (!outs) break;
    for (const auto& o : *outs) {
      EXPECT_FALSE(aborted && o.request_id == abort) << "news of an aborted request";
      auto& t = result.tokens[o.request_id];
      t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finish_reason) result.finish[o.request_id] = *o.finish_reason;
    }
    if (!aborted && abort != 0 && result.tokens[abort].size() >= abort_after) {
      (*core)->abort_requests(std::vector<RequestId>{abort});
      aborted = true;
    }
    if (step > 100000) {
      ADD_FAILURE() << "engine did not finish";
      break;
    }
  }
  EXPECT_EQ((*core)->scheduler().kv_cache_manager().num_free_blocks(), (*core)->num_kv_blocks());
  result.queued = (*core)->steps_queued_ahead();
  result.dropped = (*core)->steps_dropped();
  result.fed = dynamic_cast<const FakeModel&>((*core)->model_runner()).num_fed_steps();
  result.preemptions = (*core)->stats().num_preemptions;
  return result;
}

void expect_same(const RunResult& sync, const RunResult& async) {
  EXPECT_EQ(sync.tokens, async.tokens);
  EXPECT_EQ(sync.finish, async.finish);
  EXPECT_EQ(sync.queued, 0);
  EXPECT_GT(async.queued, 0);
  EXPECT_EQ(async.fed, async.queued);  // every queued step took its tokens from the one before
}

TEST(AsyncScheduling, SameTokensAsTheSynchronousEngine) {
  const auto reqs = workload(11, 30);
  const RunResult sync = run(config(false), reqs);
  const RunResult async = run(config(true), reqs);
  expect_same(sync, async);
  EXPECT_GT(async.dropped, 0);  // some request stopped on EOS or a stop token mid-pipeline
  EXPECT_LT(async.dropped, async.queued);
  int eos = 0;
  for (const auto& [id, reason] : async.finish)
    eos += reason == FinishReason::kStop;
  EXPECT_GT(eos, 0);
}

TEST(AsyncScheduling, OneLongDecodeQueuesEveryStepItCan) {
  EngineCoreRequest r;
  r.request_id = 1;
  r.prompt_token_ids = {3, 4, 5};
  r.params.max_tokens = 50;
  r.params.ignore_eos = true;
  const RunResult sync = run(config(false), {r});
  const RunResult async = run(config(true), {r});
  expect_same(sync, async);
  ASSERT_EQ(async.tokens.at(1).size(), 50u);
  // 49 decode steps follow the prefill; each is queued behind the step before except the one
  // that would follow the 50th token (the request stops on length). The lookahead slot each
  // step reserves means a new KV block never stops one from being queued.
  EXPECT_EQ(async.queued, 48);
  EXPECT_EQ(async.dropped, 0);
}

// A fake runner that prefers async scheduling, as a GPU runner with graphs does.
class PreferringFakeModel final : public FakeModel {
 public:
  using FakeModel::FakeModel;
  bool prefers_async_sampling() const override { return true; }
};

// Unset, the choice is the runner's (on for a GPU runner, like vLLM's default); set, it is the
// config's; a runner that cannot launch asynchronously never queues steps.
TEST(AsyncScheduling, UnsetFollowsTheRunnersPreference) {
  auto queues = [](std::optional<bool> setting, std::unique_ptr<FakeModel> runner) {
    EngineConfig c = config(false);
    c.async_scheduling = setting;
    auto core = EngineCore::create(c, std::move(runner));
    EXPECT_TRUE(core.has_value());
    return core.has_value() && (*core)->async_scheduling();
  };
  auto preferring = [] { return std::make_unique<PreferringFakeModel>(fake_config()); };
  auto plain = [] { return std::make_unique<FakeModel>(fake_config()); };
  auto unable = [] { return std::make_unique<PreferringFakeModel>(fake_config(false)); };
  EXPECT_TRUE(queues(std::nullopt, preferring()));
  EXPECT_FALSE(queues(std::nullopt, plain()));
  EXPECT_FALSE(queues(false, preferring()));
  EXPECT_TRUE(queues(true, plain()));
  EXPECT_FALSE(queues(true, unable()));
  EXPECT_FALSE(queues(std::nullopt, unable()));
}

TEST(AsyncScheduling, SameTokensWithPreemptionAndChunkedPrefill) {
  const auto reqs = workload(12, 24);
  EngineConfig tight_sync = config(false);
  tight_sync.num_kv_blocks = 48;
  tight_sync.enable_prefix_caching = false;
  tight_sync.scheduler.max_num_batched_tokens = 9;
  EngineConfig tight_async = tight_sync;
  tight_async.async_scheduling = true;
  const RunResult sync = run(tight_sync, reqs);
  const RunResult async = run(tight_async, reqs);
  expect_same(sync, async);
  EXPECT_GT(async.preemptions, 0u);
}

TEST(AsyncScheduling, AnAbortWhileAStepIsQueuedTakesEffectAfterIt) {
  std::vector<EngineCoreRequest> reqs;
  for (int i = 0; i < 3; ++i) {
    EngineCoreRequest r;
    r.request_id = static_cast<RequestId>(10 + i);
    r.prompt_token_ids = {static_cast<int32_t>(2 + i), 9, 9};
    r.params.max_tokens = 40;
    r.params.ignore_eos = true;
    reqs.push_back(r);
  }
  const RunResult sync = run(config(false), reqs, true, 11, 9);
  const RunResult async = run(config(true), reqs, true, 11, 9);
  expect_same(sync, async);
  EXPECT_EQ(async.tokens.at(11).size(), 9u);  // no token after the abort reached the caller
  EXPECT_EQ(async.tokens.at(10).size(), 40u);
  EXPECT_EQ(async.tokens.at(12).size(), 40u);
  EXPECT_FALSE(async.finish.count(11));
}

TEST(AsyncScheduling, ARunnerThatCannotLaunchAsynchronouslyRunsEveryStepInTurn) {
  const auto reqs = workload(13, 8);
  const RunResult sync = run(config(false), reqs, false);
  const RunResult flagged = run(config(true), reqs, false);
  EXPECT_EQ(sync.tokens, flagged.tokens);
  EXPECT_EQ(flagged.queued, 0);
}

}  // namespace
}  // namespace locus
