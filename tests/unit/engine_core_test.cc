// EngineCore with the fake model: outputs match the model's reference greedy decode, prompt and
// sample logprobs are right, the fake model really reads KV through block tables, aborts free
// blocks, and the KV pool is sized from the model's spec.
#include "engine/engine_core.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "engine/fake_model.h"
#include "engine/input_batch.h"

namespace locus {
namespace {

FakeModelConfig fake_config() {
  FakeModelConfig fm;
  fm.vocab_size = 64;
  fm.block_size = 4;
  return fm;
}

EngineConfig engine_config() {
  EngineConfig c;
  c.scheduler.max_model_len = 128;
  c.scheduler.max_num_batched_tokens = 256;
  c.num_kv_blocks = 256;
  return c;
}

std::unique_ptr<EngineCore> make_core(const EngineConfig& c, FakeModelConfig fm = fake_config()) {
  auto core = EngineCore::create(c, std::make_unique<FakeModel>(fm));
  EXPECT_TRUE(core.has_value()) << core.error().to_string();
  return std::move(*core);
}

EngineCoreRequest greedy(RequestId id, std::vector<int32_t> prompt, int max_tokens) {
  EngineCoreRequest r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  return r;
}

std::map<RequestId, std::vector<EngineCoreOutput>> run(EngineCore& core) {
  std::map<RequestId, std::vector<EngineCoreOutput>> all;
  while (core.has_unfinished_requests()) {
    auto outs = core.step();
    EXPECT_TRUE(outs.has_value()) << outs.error().to_string();
    if (!outs) break;
    for (auto& o : *outs)
      all[o.request_id].push_back(std::move(o));
  }
  return all;
}

std::vector<int32_t> tokens_of(const std::vector<EngineCoreOutput>& outs) {
  std::vector<int32_t> t;
  for (const auto& o : outs)
    t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
  return t;
}

TEST(EngineCore, GreedyOutputMatchesTheModelsReferenceDecode) {
  auto core = make_core(engine_config());
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  ASSERT_TRUE(core->add_request(greedy(1, prompt, 20)).is_ok());
  auto outs = run(*core);
  FakeModel reference(fake_config());
  std::vector<int32_t> history = prompt;
  std::vector<int32_t> expected;
  for (int i = 0; i < 20; ++i) {
    auto logits = reference.reference_logits(history);
    int32_t best = 0;
    for (int v = 1; v < 64; ++v) {
      if (logits[static_cast<size_t>(v)] > logits[static_cast<size_t>(best)]) best = v;
    }
    expected.push_back(best);
    history.push_back(best);
  }
  EXPECT_EQ(tokens_of(outs[1]), expected);
  EXPECT_EQ(outs[1].back().finish_reason, FinishReason::kLength);
}

TEST(EngineCore, PromptLogprobsAcrossChunksMatchTheReference) {
  EngineConfig c = engine_config();
  c.scheduler.max_num_batched_tokens = 5;  // the 13-token prompt arrives in three chunks
  auto core = make_core(c);
  const std::vector<int32_t> prompt = {7, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  EngineCoreRequest r = greedy(1, prompt, 3);
  r.params.prompt_logprobs = 2;
  r.params.logprobs = 1;
  ASSERT_TRUE(core->add_request(std::move(r)).is_ok());
  auto outs = run(*core);
  std::vector<Logprobs> prompt_lp;
  std::vector<Logprobs> sample_lp;
  for (const auto& o : outs[1]) {
    prompt_lp.insert(prompt_lp.end(), o.new_prompt_logprobs.begin(), o.new_prompt_logprobs.end());
    sample_lp.insert(sample_lp.end(), o.new_logprobs.begin(), o.new_logprobs.end());
  }
  ASSERT_EQ(prompt_lp.size(), prompt.size() - 1);
  FakeModel reference(fake_config());
  for (size_t p = 0; p + 1 < prompt.size(); ++p) {
    std::vector<int32_t> history(prompt.begin(),
                                 prompt.begin() + static_cast<std::ptrdiff_t>(p) + 1);
    const auto logits = reference.reference_logits(history);
    const Logprobs want = compute_logprobs(logits, prompt[p + 1], 2);
    EXPECT_EQ(prompt_lp[p].token.token_id, prompt[p + 1]);
    EXPECT_FLOAT_EQ(prompt_lp[p].token.logprob, want.token.logprob) << "position " << p;
    EXPECT_EQ(prompt_lp[p].token.rank, want.token.rank);
    ASSERT_EQ(prompt_lp[p].top.size(), 2u);
    EXPECT_EQ(prompt_lp[p].top[0].token_id, want.top[0].token_id);
  }
  ASSERT_EQ(sample_lp.size(), 3u);
  const auto tokens = tokens_of(outs[1]);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(sample_lp[i].token.token_id, tokens[i]);
    EXPECT_EQ(sample_lp[i].token.rank, 1);  // greedy picks the top token
    EXPECT_EQ(sample_lp[i].top.size(), 1u);
  }
}

TEST(EngineCore, FakeModelDetectsAWrongBlockTable) {
  FakeModel model(fake_config());
  ASSERT_TRUE(model.initialize_kv_cache(8).is_ok());
  // Write 6 tokens into blocks 3 and 5.
  ModelInputBatch b;
  b.num_reqs = 1;
  b.block_size = 4;
  b.token_ids = {1, 2, 3, 4, 5, 6};
  b.positions = {0, 1, 2, 3, 4, 5};
  b.query_start_loc = {0, 6};
  b.seq_lens = {6};
  b.num_computed_tokens = {0};
  b.max_num_blocks_per_req = 2;
  b.block_table = {3, 5};
  b.slot_mapping = {12, 13, 14, 15, 20, 21};
  b.logits_indices = {5};
  auto first = model.execute(b);
  ASSERT_TRUE(first.has_value()) << first.error().to_string();
  const auto want = model.reference_logits({1, 2, 3, 4, 5, 6});
  EXPECT_EQ(std::vector<float>(first->data<float>(), first->data<float>() + 64), want);
  // Decode one token with the blocks swapped: the model must notice.
  ModelInputBatch d = b;
  d.token_ids = {7};
  d.positions = {6};
  d.query_start_loc = {0, 1};
  d.seq_lens = {7};
  d.num_computed_tokens = {6};
  d.slot_mapping = {22};
  d.logits_indices = {0};
  d.block_table = {5, 3};
  auto wrong = model.execute(d);
  ASSERT_FALSE(wrong.has_value());
  EXPECT_NE(wrong.error().message().find("wrong block table or slot mapping"), std::string::npos);
  d.block_table = {3, 5};
  EXPECT_TRUE(model.execute(d).has_value());
}

TEST(EngineCore, AbortFreesBlocksAtOnce) {
  auto core = make_core(engine_config());
  for (RequestId id = 1; id <= 4; ++id) {
    ASSERT_TRUE(
        core->add_request(greedy(id, std::vector<int32_t>(20, static_cast<int32_t>(id)), 50))
            .is_ok());
  }
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(core->step().has_value());
  EXPECT_GT(core->stats().kv_cache_usage, 0.0);
  const std::vector<RequestId> ids = {1, 2, 3, 4};
  core->abort_requests(ids);
  EXPECT_FALSE(core->has_unfinished_requests());
  EXPECT_EQ(core->stats().kv_cache_usage, 0.0);
  EXPECT_EQ(core->scheduler().kv_cache_manager().num_free_blocks(), core->num_kv_blocks());
}

TEST(EngineCore, StopsAtEosFromTheConfig) {
  // Find the token greedy decode produces third, make it the EOS, and check the stop.
  auto probe = make_core(engine_config());
  const std::vector<int32_t> prompt = {9, 8, 7};
  ASSERT_TRUE(probe->add_request(greedy(1, prompt, 5)).is_ok());
  const auto tokens = tokens_of(run(*probe)[1]);
  EngineConfig c = engine_config();
  c.eos_token_id = tokens[2];
  auto core = make_core(c);
  ASSERT_TRUE(core->add_request(greedy(1, prompt, 5)).is_ok());
  auto outs = run(*core)[1];
  const auto got = tokens_of(outs);
  ASSERT_LE(got.size(), 3u);
  EXPECT_EQ(got.back(), tokens[2]);
  EXPECT_EQ(outs.back().finish_reason, FinishReason::kStop);
}

TEST(EngineCore, RejectsFanOutAndOutOfVocabPrompts) {
  auto core = make_core(engine_config());
  EngineCoreRequest r = greedy(1, {1, 2}, 4);
  r.params.n = 2;
  EXPECT_FALSE(core->add_request(std::move(r)).is_ok());
  EXPECT_NE(core->add_request(greedy(2, {1, 64}, 4)).message().find("outside the vocabulary"),
            std::string::npos);
}

TEST(EngineCore, SizesTheKvPoolFromTheModelSpecAndBudget) {
  EngineConfig c = engine_config();
  c.num_kv_blocks = 0;
  FakeModel probe(fake_config());
  const int64_t per_block = probe.kv_cache_spec().bytes_per_block();
  c.kv_cache_memory_bytes = per_block * 100 + per_block / 2;
  auto core = make_core(c);
  EXPECT_EQ(core->num_kv_blocks(), 100);
  c.kv_cache_memory_bytes = per_block * 10;  // 40 tokens < max_model_len 128
  auto small = EngineCore::create(c, std::make_unique<FakeModel>(fake_config()));
  ASSERT_FALSE(small.has_value());
  EXPECT_NE(small.error().message().find("max seq len (128)"), std::string::npos);
}

TEST(EngineCore, BuildsSlotMappingFromBlockTables) {
  // Two requests: a 6-token prefill and a decode at position 9, blocks of 4.
  EngineCoreRequest a = greedy(1, {1, 2, 3, 4, 5, 6}, 4);
  Request ra(std::move(a), 128);
  EngineCoreRequest b = greedy(2, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 4);
  Request rb(std::move(b), 128);
  const std::vector<BlockId> blocks_a = {7, 2};
  const std::vector<BlockId> blocks_b = {0, 4, 9};
  SchedulerOutput so;
  so.scheduled.push_back({&ra, 0, 6, true, true, true, blocks_a});
  so.scheduled.push_back({&rb, 9, 1, true, false, false, blocks_b});
  so.total_num_scheduled_tokens = 7;
  BuiltBatch built = build_model_input(so, 4);
  const ModelInputBatch& batch = built.batch;
  EXPECT_EQ(batch.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 9}));
  EXPECT_EQ(batch.slot_mapping, (std::vector<int64_t>{28, 29, 30, 31, 8, 9, 37}));
  EXPECT_EQ(batch.query_start_loc, (std::vector<int32_t>{0, 6, 7}));
  EXPECT_EQ(batch.seq_lens, (std::vector<int32_t>{6, 10}));
  EXPECT_EQ(batch.max_num_blocks_per_req, 3);
  EXPECT_EQ(batch.block_table, (std::vector<int32_t>{7, 2, kPadBlockId, 0, 4, 9}));
  EXPECT_EQ(batch.logits_indices, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(built.layout[1].sample_row, 1);
}

}  // namespace
}  // namespace locus
