// Every fixture model on the CUDA backend (bf16 weights and activations) against the
// transformers goldens of tests/fixtures/models (f32), with the prompts batched, chunked and
// alone, and greedy continuations against the CPU backend's.
//
// bf16 is compared the way vLLM compares itself with Hugging Face (check_logprobs_close):
// these tiny random models route on near-equal router scores, so bf16 rounding flips an expert
// choice at some positions and moves those logits a lot, while a real bug moves all of them.
// So per position: each side's top-1 token must be in the other's top 5, and the median
// position's relative L2 must stay under 2e-2 (the worst is printed). Greedy: decode on both
// backends; at the first token that differs, each backend's token must be in the other's top 5
// there, and the comparison of that sequence stops (the contexts differ after it).
// SKIPPED where no GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/device.h"
#include "io/safetensors.h"
#include "model/weight_source.h"
#include "unit/forward_test_util.h"
#include "unit/ops_test_util.h"

#ifdef LOCUS_HAS_CUDA
#include "backend/cuda/runtime/cuda_backend.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA
TEST(CudaModel, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}
#else

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// Whether `token` is among the `n` largest entries of `row` (ties counted generously).
bool in_top(std::span<const float> row, int32_t token, int n) {
  const float v = row[static_cast<size_t>(token)];
  int above = 0;
  for (float x : row)
    above += x > v ? 1 : 0;
  return above < n;
}

template <typename T>
std::vector<T> read(const SafetensorsFile& file, const std::string& name) {
  auto t = file.tensor(name);
  EXPECT_TRUE(t.has_value()) << name;
  if (!t) return {};
  std::vector<T> out(static_cast<size_t>(t->numel()));
  std::memcpy(out.data(), t->raw_data(), out.size() * sizeof(T));
  return out;
}

class CudaModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaModel, MatchesGoldensAndCpuGreedy) {
  const DeviceReport report = query_devices();
  if (report.gpus.empty()) GTEST_SKIP() << "no CUDA GPU: " << report.cuda_unavailable_reason;
  const std::string name = GetParam();
  const auto dir = std::filesystem::path(LOCUS_TEST_DATA_DIR) / "models" / name;
  auto config = load_model_config(dir);
  ASSERT_TRUE(config.has_value()) << config.status().to_string();
  auto weights = CheckpointWeights::open(dir);
  ASSERT_TRUE(weights.has_value()) << weights.status().to_string();
  auto golden = SafetensorsFile::open(dir / "golden.safetensors");
  ASSERT_TRUE(golden.has_value()) << golden.status().to_string();
  const int num_prompts = std::stoi(golden->metadata().at("num_prompts"));
  testing::Prompts prompts;
  std::vector<std::vector<float>> want_logits;
  size_t steps = 0;
  for (int i = 0; i < num_prompts; ++i) {
    prompts.push_back(read<int32_t>(*golden, "prompt." + std::to_string(i)));
    want_logits.push_back(read<float>(*golden, "logits." + std::to_string(i)));
    steps = read<int32_t>(*golden, "greedy." + std::to_string(i)).size();
  }
  size_t longest = 0;
  for (const auto& p : prompts)
    longest = std::max(longest, p.size() + steps);

  auto gpu = CudaBackend::create();
  ASSERT_TRUE(gpu.has_value()) << gpu.status().to_string();
  auto model = Model::load(*config, **weights, **gpu);
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  testing::Driver driver{**model, 16, static_cast<int64_t>(longest)};
  const int64_t vocab = (*model)->vocab_size();
  std::vector<double> position_errors;
  int misses = 0;
  auto check_rows = [&](const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t p = 0; p * static_cast<size_t>(vocab) < got.size(); ++p) {
      std::span g(got.data() + p * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
      std::span w(want.data() + p * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
      for (float v : g)
        ASSERT_FALSE(std::isnan(v)) << what << " position " << p;
      position_errors.push_back(testing::rel_l2(g, w));
      if (!in_top(w, argmax(g), 5) || !in_top(g, argmax(w), 5)) {
        ++misses;
        ADD_FAILURE() << what << " position " << p << ": top-1 " << argmax(g) << " (GPU) vs "
                      << argmax(w) << " (golden) not in each other's top 5";
      }
    }
  };
  for (int64_t chunk : {0, 5}) {
    const auto got = driver.prefill_logits(prompts, chunk);
    ASSERT_EQ(got.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      check_rows(got[i], want_logits[i],
                 "prompt " + std::to_string(i) + " chunk " + std::to_string(chunk));
    }
  }
  const auto alone = driver.prefill_logits_alone(prompts, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    check_rows(alone[i], want_logits[i], "prompt " + std::to_string(i) + " alone");
  }
  std::sort(position_errors.begin(), position_errors.end());
  const double median = position_errors[position_errors.size() / 2];
  const double worst = position_errors.back();
  EXPECT_LT(median, 2e-2) << "the typical position is off, not just routing flips";

  CpuBackend cpu;
  auto cpu_model = Model::load(*config, **weights, cpu);
  ASSERT_TRUE(cpu_model.has_value());
  testing::Driver cpu_driver{**cpu_model, 16, static_cast<int64_t>(longest)};
  std::vector<std::vector<float>> cpu_steps, gpu_steps;
  const auto cpu_tokens = cpu_driver.greedy(prompts, static_cast<int64_t>(steps), &cpu_steps);
  const auto gpu_tokens = driver.greedy(prompts, static_cast<int64_t>(steps), &gpu_steps);
  int identical = 0, diverged = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (gpu_tokens[i] == cpu_tokens[i]) {
      ++identical;
      continue;
    }
    ++diverged;
    size_t s = 0;
    while (gpu_tokens[i][s] == cpu_tokens[i][s])
      ++s;
    std::span c(cpu_steps[i].data() + s * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
    std::span g(gpu_steps[i].data() + s * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
    std::printf("  %s prompt %zu diverges at step %zu: CPU %d, GPU %d\n", name.c_str(), i, s,
                cpu_tokens[i][s], gpu_tokens[i][s]);
    EXPECT_TRUE(in_top(c, gpu_tokens[i][s], 5) && in_top(g, cpu_tokens[i][s], 5))
        << "prompt " << i << " step " << s << ": GPU token " << gpu_tokens[i][s]
        << " and CPU token " << cpu_tokens[i][s] << " are not in each other's top 5";
  }
  std::printf(
      "[cuda golden] %-16s position rel L2 median %.2e worst %.2e, %d top-5 misses; "
      "greedy %d/%zu sequences identical, %d diverge\n",
      name.c_str(), median, worst, misses, identical, prompts.size(), diverged);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaModel,
                         ::testing::Values("qwen3-moe", "mixtral", "glm4-moe", "minimax-m2",
                                           "deepseek-v3", "deepseek-v3-fp8", "deepseek-v2",
                                           "kimi-k2"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });
#endif

}  // namespace
}  // namespace locus
