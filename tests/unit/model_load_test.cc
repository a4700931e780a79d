// Model loading and the forward's contract: every tiny family loads from dummy weights (fp8
// included) and produces finite logits of the right shape; the KV cache has the documented
// layout; bad checkpoints, budgets, quantizations, architectures and batches are errors that
// say what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "backend/cpu/cpu_backend.h"
#include "model/dummy_weights.h"
#include "model/model.h"
#include "model/model_registry.h"
#include "unit/forward_test_util.h"
#include "unit/model_test_configs.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

std::unique_ptr<Model> load_tiny(const std::string& name, const WeightSource* source,
                                 Ops& backend) {
  for (const auto& m : testing::tiny_models()) {
    if (m.name != name) continue;
    ModelConfig config = testing::parse_tiny(m);
    DummyWeights dummy(weight_layout(config).value(), 3);
    auto model = Model::load(config, source ? *source : dummy, backend);
    EXPECT_TRUE(model.has_value()) << model.status().to_string();
    return model ? std::move(*model) : nullptr;
  }
  ADD_FAILURE() << "no tiny model " << name;
  return nullptr;
}

TEST(ModelLoad, EveryTinyFamilyRunsOnDummyWeights) {
  CpuBackend backend;
  for (const auto& m : testing::tiny_models()) {
    SCOPED_TRACE(m.name);
    auto model = load_tiny(m.name, nullptr, backend);
    ASSERT_NE(model, nullptr);
    testing::Driver driver{*model, 4, 16};
    auto logits = driver.prefill_logits({{5, 17, 3, 90, 1}, {2}}, 0);
    ASSERT_EQ(logits.size(), 2u);
    ASSERT_EQ(logits[0].size(), 5u * 97u);
    ASSERT_EQ(logits[1].size(), 97u);
    double spread = 0;
    for (float v : logits[0]) {
      ASSERT_TRUE(std::isfinite(v));
      spread = std::max(spread, std::fabs(static_cast<double>(v - logits[0][0])));
    }
    EXPECT_GT(spread, 1e-3);  // not a constant output
  }
}

TEST(ModelLoad, KvCacheLayoutPerAttentionKind) {
  CpuBackend backend;
  auto qwen = load_tiny("qwen3_moe", nullptr, backend);
  KvCache gqa = qwen->allocate_kv_cache(6, 8).value();
  ASSERT_EQ(gqa.layers.size(), 3u);
  EXPECT_EQ(gqa.layers[0].k.shape(), (Dims{6, 8, 2, 16}));
  EXPECT_EQ(gqa.layers[0].v.shape(), (Dims{6, 8, 2, 16}));
  auto v3 = load_tiny("deepseek_v3", nullptr, backend);
  KvCache mla = v3->allocate_kv_cache(6, 8).value();
  EXPECT_EQ(mla.layers[0].k.shape(), (Dims{6, 8, 16 + 8}));  // kv_lora_rank + rope
  EXPECT_FALSE(mla.layers[0].v.defined());
  EXPECT_EQ(v3->kv_cache_shape().elements_per_token(), 24);
}

// Serves every tensor of a source except one.
class HidingSource final : public WeightSource {
 public:
  HidingSource(const WeightSource& inner, std::string hidden)
      : inner_(inner), hidden_(std::move(hidden)) {}
  std::vector<std::string> names() const override {
    auto n = inner_.names();
    std::erase(n, hidden_);
    return n;
  }
  bool contains(std::string_view name) const override {
    return name != hidden_ && inner_.contains(name);
  }
  Expected<WeightInfo> info(std::string_view name) const override {
    if (name == hidden_) return not_found(std::string(name));
    return inner_.info(name);
  }
  Expected<Tensor> tensor(std::string_view name) const override {
    if (name == hidden_) return not_found(std::string(name));
    return inner_.tensor(name);
  }
  std::string description() const override { return "hiding source"; }

 private:
  const WeightSource& inner_;
  std::string hidden_;
};

TEST(ModelLoad, MissingWeightsAreNamedBeforeAnythingLoads) {
  CpuBackend backend;
  ModelConfig config = testing::parse_tiny(testing::tiny_models()[0]);
  DummyWeights dummy(weight_layout(config).value(), 3);
  HidingSource source(dummy, "model.layers.1.mlp.experts.5.up_proj.weight");
  auto model = Model::load(config, source, backend);
  ASSERT_FALSE(model.has_value());
  EXPECT_NE(model.status().message().find("missing tensor 'model.layers.1.mlp.experts.5.up_proj"),
            std::string::npos)
      << model.status().message();
}

TEST(ModelLoad, FullSizeModelsFailClearlyOverTheWeightBudget) {
  // Qwen3-30B-A3B's ~30B parameters need ~122 GB as f32: refused before any allocation.
  CpuBackend backend(CpuBackendOptions{cpu::GemmEngine::kOpenBlas, 1, uint64_t{16} << 30});
  ModelConfig config =
      load_model_config(std::filesystem::path(LOCUS_TEST_DATA_DIR) / "configs/qwen3-30b-a3b")
          .value();
  DummyWeights dummy(weight_layout(config).value(), 0);
  auto model = Model::load(config, dummy, backend);
  ASSERT_FALSE(model.has_value());
  EXPECT_EQ(model.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(model.status().message().find("over its budget of 17.18 GB"), std::string::npos)
      << model.status().message();
}

TEST(ModelLoad, UnsupportedQuantizationAndArchitectures) {
  CpuBackend backend;
  ModelConfig nvfp4 =
      load_model_config(std::filesystem::path(LOCUS_TEST_DATA_DIR) / "configs/qwen3-30b-a3b-nvfp4")
          .value();
  DummyWeights dummy(weight_layout(nvfp4).value(), 0);
  auto model = Model::load(nvfp4, dummy, backend);
  ASSERT_FALSE(model.has_value());
  EXPECT_EQ(model.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(model.status().message().find("NVFP4"), std::string::npos);

  EXPECT_EQ(registered_architectures().size(), 6u);
  auto llama = find_architecture("LlamaForCausalLM");
  ASSERT_FALSE(llama.has_value());
  EXPECT_NE(llama.status().message().find("Qwen3MoeForCausalLM"), std::string::npos);
  EXPECT_EQ((*find_architecture("DeepseekV3ForCausalLM"))->architecture, Architecture::kDeepseekV3);
}

TEST(ModelLoad, TiedEmbeddingsServeAsLmHead) {
  CpuBackend backend;
  std::string json = testing::tiny_models()[0].json;
  json.insert(json.find('{') + 1, R"("tie_word_embeddings": true,)");
  ModelConfig config = parse_model_config_text(json, "tied").value();
  DummyWeights dummy(weight_layout(config).value(), 3);
  ASSERT_FALSE(dummy.contains("lm_head.weight"));
  auto model = Model::load(config, dummy, backend);
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  testing::Driver driver{**model, 4, 8};
  EXPECT_EQ(driver.prefill_logits({{1, 2, 3}}, 0)[0].size(), 3u * 97u);
}

TEST(ForwardBatch, InconsistentBatchesAreRejected) {
  CpuBackend backend;
  auto model = load_tiny("mixtral", nullptr, backend);
  KvCache cache = model->allocate_kv_cache(4, 4).value();
  ForwardBatchBuilder builder(4);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(
      builder.add_sequence(tokens, 0, std::vector<int32_t>{3, 1}, LogitsFor::kLastToken).is_ok());
  ForwardBatch good = std::move(builder).build();
  EXPECT_EQ(good.slot_mapping, (std::vector<int64_t>{12, 13, 14, 15, 4, 5}));
  EXPECT_EQ(good.logits_indices, (std::vector<int32_t>{5}));
  ASSERT_TRUE(model->forward(good, cache).has_value());

  ForwardBatch bad_slot = good;
  bad_slot.slot_mapping[4] = 6;
  auto r = model->forward(bad_slot, cache);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("token 4 (sequence 0, index 4) has slot 6"),
            std::string::npos)
      << r.status().message();

  ForwardBatch bad_block = good;
  bad_block.block_table[1] = 4;
  bad_block.slot_mapping[4] = 16;
  bad_block.slot_mapping[5] = 17;
  r = model->forward(bad_block, cache);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("block 1 is id 4"), std::string::npos)
      << r.status().message();

  ForwardBatch bad_logits = good;
  bad_logits.logits_indices = {6};
  EXPECT_FALSE(model->forward(bad_logits, cache).has_value());

  ForwardBatch bad_token = good;
  bad_token.token_ids[0] = 97;
  r = model->forward(bad_token, cache);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("token id 97"), std::string::npos) << r.status().message();
}

// Logits of every row (a decode step's shape) skip the row gather: the upload says so only for
// indices 0..T-1, and those logits equal the ones the gather gives row by row (bit for bit with
// the batch-invariant GEMM, whose rows do not depend on how many there are).
TEST(ForwardBatch, LogitsOfEveryRowSkipTheGatherWithTheSameValues) {
  CpuBackend backend(CpuBackendOptions{cpu::GemmEngine::kBatchInvariant, 2, 0});
  auto model = load_tiny("qwen3_moe", nullptr, backend);
  ASSERT_NE(model, nullptr);
  ForwardBatchBuilder builder(4);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5};
  ASSERT_TRUE(
      builder.add_sequence(tokens, 0, std::vector<int32_t>{0, 1}, LogitsFor::kAllTokens).is_ok());
  const ForwardBatch all = std::move(builder).build();
  ASSERT_EQ(all.logits_indices, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(upload_forward_batch(backend, all).value().logits_all_rows);
  ForwardBatch some = all;
  some.logits_indices = {0, 1, 2, 3};
  EXPECT_FALSE(upload_forward_batch(backend, some).value().logits_all_rows);
  some.logits_indices = {0, 1, 2, 4, 3};
  EXPECT_FALSE(upload_forward_batch(backend, some).value().logits_all_rows);

  KvCache cache = model->allocate_kv_cache(4, 4).value();
  const Tensor every = model->forward(all, cache).value();
  ASSERT_EQ(every.size(0), 5);
  const int64_t vocab = every.size(1);
  const std::vector<float> every_values = testing::to_floats(every);
  for (int32_t row : {4, 0, 2}) {
    ForwardBatch one = all;
    one.logits_indices = {row};
    KvCache fresh = model->allocate_kv_cache(4, 4).value();
    const std::vector<float> got = testing::to_floats(model->forward(one, fresh).value());
    const std::vector<float> want(every_values.begin() + row * vocab,
                                  every_values.begin() + (row + 1) * vocab);
    EXPECT_EQ(got, want) << "row " << row;
  }
}

}  // namespace
}  // namespace locus
