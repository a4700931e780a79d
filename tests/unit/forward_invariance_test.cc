// Whole-model forward of every tiny family on dummy weights: the logits of a sequence must not
// depend on how it is scheduled. Alone, batched with unequal neighbours, prefilled in chunks of
// 5 or one token at a time (decode) give bit-identical logits with the batch-invariant GEMM,
// and agree to f32 rounding with OpenBLAS. Greedy decoding is likewise batch-independent.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model/dummy_weights.h"
#include "unit/forward_test_util.h"
#include "unit/model_test_configs.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

testing::Prompts make_prompts(int64_t vocab) {
  testing::Prompts prompts;
  uint64_t stream = stream_key(42, 0xF0);
  uint64_t i = 0;
  for (int64_t len : {7, 12, 3}) {
    std::vector<int32_t> p;
    for (int64_t j = 0; j < len; ++j)
      p.push_back(static_cast<int32_t>(counter_uniform(stream, i++) * static_cast<float>(vocab)));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

class ForwardInvariance : public ::testing::TestWithParam<testing::TinyModel> {
 protected:
  void run(cpu::GemmEngine engine) {
    ModelConfig config = testing::parse_tiny(GetParam());
    DummyWeights weights(weight_layout(config).value(), 1234);
    CpuBackend backend(CpuBackendOptions{engine, 2, 0});
    auto model = Model::load(config, weights, backend);
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    testing::Driver driver{**model, 4, 32};
    const testing::Prompts prompts = make_prompts(config.vocab_size);

    const auto batched = driver.prefill_logits(prompts, 0);
    const auto alone = driver.prefill_logits_alone(prompts, 0);
    const auto chunked = driver.prefill_logits(prompts, 5);
    const auto decoded = driver.prefill_logits(prompts, 1);
    ASSERT_EQ(batched.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(batched[i].size(), prompts[i].size() * static_cast<size_t>(config.vocab_size));
      for (float v : batched[i])
        ASSERT_TRUE(std::isfinite(v));
      for (const auto* other : {&alone, &chunked, &decoded}) {
        if (engine == cpu::GemmEngine::kBatchInvariant) {
          EXPECT_TRUE(testing::bitwise_equal((*other)[i], batched[i]))
              << "prompt " << i << " max diff " << testing::max_abs_diff((*other)[i], batched[i]);
        } else {
          EXPECT_LT(testing::rel_l2((*other)[i], batched[i]), 1e-5) << "prompt " << i;
        }
      }
    }

    // Greedy continuations: decoding the three together or each alone picks the same tokens.
    std::vector<std::vector<float>> together_logits;
    const auto together = driver.greedy(prompts, 6, &together_logits);
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::vector<std::vector<float>> solo_logits;
      const auto solo = driver.greedy({prompts[i]}, 6, &solo_logits);
      EXPECT_EQ(solo[0], together[i]) << "prompt " << i;
      if (engine == cpu::GemmEngine::kBatchInvariant) {
        EXPECT_TRUE(testing::bitwise_equal(solo_logits[0], together_logits[i])) << "prompt " << i;
      }
    }
  }
};

TEST_P(ForwardInvariance, BatchInvariantGemmIsBitExact) {
  run(cpu::GemmEngine::kBatchInvariant);
}

TEST_P(ForwardInvariance, OpenBlasAgreesToRounding) {
  run(cpu::GemmEngine::kOpenBlas);
}

INSTANTIATE_TEST_SUITE_P(TinyFamilies, ForwardInvariance,
                         ::testing::ValuesIn(testing::tiny_models()),
                         [](const ::testing::TestParamInfo<testing::TinyModel>& param_info) {
                           return param_info.param.name;
                         });

}  // namespace
}  // namespace locus
