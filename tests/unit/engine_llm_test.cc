// LLMEngine: the engine thread + output thread + streams. Concurrent adds, stop strings that
// finish engine-side sequences, aborts that free blocks, n > 1, synchronous validation errors,
// model failures and shutdown.
#include "engine/llm_engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "engine/fake_detokenizer.h"
#include "engine/fake_model.h"

namespace locus {
namespace {

constexpr int kVocab = 26;  // letters: token t is 'a' + t

FakeModelConfig fake_config() {
  FakeModelConfig fm;
  fm.vocab_size = kVocab;
  fm.block_size = 4;
  return fm;
}

EngineConfig engine_config() {
  EngineConfig c;
  c.scheduler.max_model_len = 256;
  c.scheduler.max_num_batched_tokens = 64;
  c.num_kv_blocks = 512;
  return c;
}

std::unique_ptr<LLMEngine> make_engine(EngineConfig c = engine_config(),
                                       std::unique_ptr<ModelRunner> model = nullptr) {
  if (!model) model = std::make_unique<FakeModel>(fake_config());
  auto e = LLMEngine::create(c, std::move(model),
                             FakeDetokenizer::factory(FakeDetokenizer::letters(kVocab)));
  EXPECT_TRUE(e.has_value()) << e.error().to_string();
  return std::move(*e);
}

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;
}

std::vector<int32_t> prompt_for(int i) {
  std::vector<int32_t> p;
  for (int k = 0; k < 5 + i % 7; ++k)
    p.push_back((i * 7 + k * 3) % kVocab);
  return p;
}

std::string letters_of(const std::vector<int32_t>& tokens) {
  std::string s;
  for (int32_t t : tokens)
    s += static_cast<char>('a' + t);
  return s;
}

// Waits (bounded) until the engine reports no running request and no referenced block.
bool wait_until_idle(const LLMEngine& e) {
  for (int i = 0; i < 2000; ++i) {
    EngineStats s = e.stats();
    if (s.scheduler.num_running_reqs == 0 && s.scheduler.num_waiting_reqs == 0 &&
        s.scheduler.kv_cache_usage == 0.0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST(LLMEngine, ConcurrentClientsGetDeterministicStreams) {
  auto engine = make_engine();
  // Reference: each prompt alone.
  std::map<int, std::vector<int32_t>> alone;
  for (int i = 0; i < 12; ++i) {
    auto s = engine->add_request(prompt_for(i), greedy(10 + i));
    ASSERT_TRUE(s.has_value());
    auto r = (*s)->collect();
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    alone[i] = r->completions[0].token_ids;
    EXPECT_EQ(r->completions[0].text, letters_of(alone[i]));
  }
  // Now 4 client threads add 3 requests each at the same time.
  std::map<int, RequestResult> got;
  std::mutex mu;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      std::vector<std::pair<int, std::shared_ptr<RequestStream>>> mine;
      for (int k = 0; k < 3; ++k) {
        const int i = c * 3 + k;
        auto s = engine->add_request(prompt_for(i), greedy(10 + i));
        ASSERT_TRUE(s.has_value());
        mine.emplace_back(i, *s);
      }
      for (auto& [i, s] : mine) {
        auto r = s->collect();
        ASSERT_TRUE(r.has_value());
        std::lock_guard lock(mu);
        got[i] = std::move(*r);
      }
    });
  }
  for (auto& t : clients)
    t.join();
  ASSERT_EQ(got.size(), 12u);
  for (int i = 0; i < 12; ++i) {
    const CompletionResult& c = got[i].completions[0];
    EXPECT_EQ(c.token_ids, alone[i]) << i;
    EXPECT_EQ(c.finish_reason, FinishReason::kLength);
    EXPECT_EQ(c.metrics.num_generation_tokens, 10 + i);
    EXPECT_GE(c.metrics.time_to_first_token(), 0.0);
    EXPECT_GE(c.metrics.e2e_latency(), c.metrics.time_to_first_token());
  }
  EXPECT_TRUE(wait_until_idle(*engine));
  EXPECT_GT(engine->stats().num_steps, 0u);
}

TEST(LLMEngine, StopStringTruncatesAndFinishesTheEngineSide) {
  auto engine = make_engine();
  auto full = engine->add_request(prompt_for(3), greedy(30));
  ASSERT_TRUE(full.has_value());
  const std::string text = (*full)->collect()->completions[0].text;
  ASSERT_EQ(text.size(), 30u);
  const std::string stop = text.substr(10, 2);
  const size_t cut = text.find(stop);
  SamplingParams p = greedy(200);
  p.stop = {stop};
  auto s = engine->add_request(prompt_for(3), p);
  ASSERT_TRUE(s.has_value());
  auto r = (*s)->collect();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->completions[0].text, text.substr(0, cut));
  EXPECT_EQ(r->completions[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(std::get<std::string>(r->completions[0].stop_reason), stop);
  // The engine side stops too (no running request left, blocks freed) instead of running to
  // max_tokens=200.
  EXPECT_TRUE(wait_until_idle(*engine));
}

// Sleeps in every step, so a request cannot finish before the test aborts it.
class SlowModel : public ModelRunner {
 public:
  SlowModel() : inner_(fake_config()) {}
  int vocab_size() const override { return inner_.vocab_size(); }
  const KVCacheSpec& kv_cache_spec() const override { return inner_.kv_cache_spec(); }
  Status initialize_kv_cache(int n) override { return inner_.initialize_kv_cache(n); }
  Expected<Tensor> execute(const ModelInputBatch& b) override {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    return inner_.execute(b);
  }

 private:
  FakeModel inner_;
};

TEST(LLMEngine, AbortMidStreamEndsTheStreamAndFreesBlocks) {
  EngineConfig c = engine_config();
  c.enable_prefix_caching = false;
  auto engine = make_engine(c, std::make_unique<SlowModel>());
  auto s = engine->add_request(prompt_for(1), greedy(240));
  ASSERT_TRUE(s.has_value());
  auto first = (*s)->next();
  ASSERT_TRUE(first.has_value());
  engine->abort((*s)->request_id());
  // Whatever was already queued, then the abort delta, then the end.
  RequestOutput last;
  while (true) {
    auto o = (*s)->next();
    ASSERT_TRUE(o.has_value()) << o.error().to_string();
    if (o->request_finished) {
      last = std::move(*o);
      break;
    }
  }
  EXPECT_EQ(last.finish_reason, FinishReason::kAbort);
  EXPECT_EQ((*s)->next().error().code(), ErrorCode::kOutOfRange);
  EXPECT_TRUE(wait_until_idle(*engine));
  engine->abort((*s)->request_id());  // twice: ignored
  engine->abort(987654);              // unknown: ignored
}

TEST(LLMEngine, NCompletionsUseSeedPlusIndex) {
  auto engine = make_engine();
  SamplingParams p;
  p.n = 3;
  p.temperature = 1.0f;
  p.seed = 40;
  p.max_tokens = 12;
  auto s = engine->add_request(prompt_for(2), p);
  ASSERT_TRUE(s.has_value());
  auto r = (*s)->collect();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->completions.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    SamplingParams one = p;
    one.n = 1;
    one.seed = 40 + static_cast<uint64_t>(i);
    auto single = engine->add_request(prompt_for(2), one);
    ASSERT_TRUE(single.has_value());
    auto sr = (*single)->collect();
    ASSERT_TRUE(sr.has_value());
    EXPECT_EQ(r->completions[static_cast<size_t>(i)].token_ids, sr->completions[0].token_ids) << i;
  }
  EXPECT_NE(r->completions[0].token_ids, r->completions[1].token_ids);
}

TEST(LLMEngine, BadRequestsFailSynchronously) {
  auto engine = make_engine();
  SamplingParams p;
  p.top_p = 2.0f;
  auto bad = engine->add_request(prompt_for(0), p);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message(), "top_p must be in (0, 1], got 2.");
  EXPECT_FALSE(engine->add_request({}, greedy(1)).has_value());
  EXPECT_FALSE(engine->add_request(std::vector<int32_t>(256, 1), greedy(1)).has_value());
  EXPECT_FALSE(engine->add_request({1, 2, kVocab}, greedy(1)).has_value());
}

TEST(LLMEngine, GenerateRunsABatchToCompletion) {
  auto engine = make_engine();
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 5; ++i)
    prompts.push_back(prompt_for(i));
  auto results = engine->generate(prompts, greedy(6));
  ASSERT_TRUE(results.has_value());
  ASSERT_EQ(results->size(), 5u);
  for (const auto& r : *results)
    EXPECT_EQ(r.completions[0].token_ids.size(), 6u);
}

// Fails on the n-th execute: every open stream must get the error, and the engine refuses
// new work afterwards.
class FailingModel : public ModelRunner {
 public:
  explicit FailingModel(int fail_at) : inner_(fake_config()), fail_at_(fail_at) {}
  int vocab_size() const override { return inner_.vocab_size(); }
  const KVCacheSpec& kv_cache_spec() const override { return inner_.kv_cache_spec(); }
  Status initialize_kv_cache(int n) override { return inner_.initialize_kv_cache(n); }
  Expected<Tensor> execute(const ModelInputBatch& b) override {
    if (++calls_ == fail_at_) return internal_error("device lost");
    return inner_.execute(b);
  }

 private:
  FakeModel inner_;
  int fail_at_;
  int calls_ = 0;
};

TEST(LLMEngine, AModelFailureFailsEveryStream) {
  auto engine = make_engine(engine_config(), std::make_unique<FailingModel>(3));
  auto a = engine->add_request(prompt_for(0), greedy(50));
  ASSERT_TRUE(a.has_value());
  // On a loaded machine the engine may already have died (three steps of `a` alone) before
  // `b` arrives; then adding it must fail with the same error instead.
  auto b = engine->add_request(prompt_for(1), greedy(50));
  auto ra = (*a)->collect();
  ASSERT_FALSE(ra.has_value());
  EXPECT_NE(ra.error().message().find("device lost"), std::string::npos);
  if (b.has_value()) {
    auto rb = (*b)->collect();
    ASSERT_FALSE(rb.has_value());
    EXPECT_NE(rb.error().message().find("device lost"), std::string::npos);
  } else {
    EXPECT_NE(b.error().message().find("device lost"), std::string::npos);
  }
  EXPECT_FALSE(engine->add_request(prompt_for(2), greedy(5)).has_value());
}

TEST(LLMEngine, ShutdownFailsOpenStreams) {
  auto engine = make_engine();
  auto s = engine->add_request(prompt_for(0), greedy(250 - 5));
  ASSERT_TRUE(s.has_value());
  engine->shutdown();
  auto r = (*s)->collect();
  if (!r.has_value()) {
    EXPECT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
  }  // (it may also have finished first on a fast machine)
  auto late = engine->add_request(prompt_for(0), greedy(5));
  ASSERT_FALSE(late.has_value());
  EXPECT_EQ(late.error().code(), ErrorCode::kResourceExhausted);
  engine->shutdown();  // idempotent
}

}  // namespace
}  // namespace locus
