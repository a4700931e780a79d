// The CPU backend's bf16-activation emulation (CpuBackendOptions::bf16_activations), which
// rounds every activation an op reads to bf16 as the CUDA backend stores them:
//  - off, it changes nothing (bit-identical logits);
//  - on, every fixture's typical prompt position stays close to the f32 goldens (median
//    relative L2 < 2e-2, the GPU test's bound), so bf16 storage alone explains that much;
//  - it reports, per fixture, the positions whose top-1 leaves the golden's top 5: the routing
//    flips bf16 storage causes on these tiny random models, to compare with the GPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "io/safetensors.h"
#include "model/weight_source.h"
#include "unit/forward_test_util.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

class Bf16Emulation : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16Emulation, StaysNearTheGoldensAndReportsFlips) {
  auto opened = testing::open_fixture(GetParam());
  ASSERT_TRUE(opened.has_value());
  const ModelConfig& config = opened->config;
  const WeightSource& weights = *opened->weights;
  const testing::Goldens& goldens = opened->goldens;
  const testing::Prompts& prompts = goldens.prompts;
  const std::vector<std::vector<float>>& want = goldens.logits;
  ASSERT_FALSE(prompts.empty());

  auto logits_with = [&](bool emulate) {
    CpuBackendOptions o;
    o.gemm_engine = cpu::GemmEngine::kBatchInvariant;
    o.num_threads = 2;
    o.bf16_activations = emulate;
    CpuBackend cpu(o);
    auto model = Model::load(config, weights, cpu);
    EXPECT_TRUE(model.has_value()) << model.status().to_string();
    int64_t longest = 0;
    for (const auto& pr : prompts)
      longest = std::max<int64_t>(longest, static_cast<int64_t>(pr.size()));
    testing::Driver driver{**model, 4, longest};
    return driver.prefill_logits(prompts, 0);
  };
  const auto plain = logits_with(false);
  const auto emulated = logits_with(true);

  const auto vocab = static_cast<size_t>(config.vocab_size);
  std::vector<double> errors;
  int flips = 0, changed_rows = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(emulated[i].size(), want[i].size());
    for (size_t p = 0; p * vocab < want[i].size(); ++p) {
      std::span g(emulated[i].data() + p * vocab, vocab);
      std::span w(want[i].data() + p * vocab, vocab);
      std::span f(plain[i].data() + p * vocab, vocab);
      errors.push_back(testing::rel_l2(g, w));
      if (std::memcmp(g.data(), f.data(), vocab * sizeof(float)) != 0) ++changed_rows;
      if (!testing::top1_in_each_others_top5(g, w)) ++flips;
    }
  }
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2];
  std::printf(
      "[bf16 emulation] %-16s position rel L2 median %.2e worst %.2e, %d of %zu positions "
      "leave the golden's top 5\n",
      GetParam().c_str(), median, errors.back(), flips, errors.size());
  EXPECT_GT(changed_rows, 0) << "the emulation changed nothing";
  EXPECT_LT(median, 2e-2);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Bf16Emulation,
                         ::testing::Values("qwen3-moe", "mixtral", "glm4-moe", "minimax-m2",
                                           "deepseek-v3", "deepseek-v3-fp8", "kimi-k2",
                                           "deepseek-v2"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string s = param.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace locus
