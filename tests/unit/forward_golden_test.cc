// Parity with Hugging Face transformers: for each tiny checkpoint in tests/fixtures/models/
// (made by tools/golden/models/make_fixtures.py with transformers 5.17, logits in f32), the CPU
// forward must reproduce the logits at every prompt position (relative L2 < 1e-3) with all
// prompts in one batch of unequal lengths, again when they are prefilled in chunks of 5 and
// when each runs alone, and the 32-token greedy continuations token for token.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "io/safetensors.h"
#include "model/weight_source.h"
#include "unit/forward_test_util.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

constexpr double kMaxRelL2 = 1e-3;

const std::vector<std::string>& fixture_names() {
  static const std::vector<std::string> names = {"qwen3-moe",   "mixtral",     "glm4-moe",
                                                 "minimax-m2",  "deepseek-v3", "deepseek-v3-fp8",
                                                 "deepseek-v2", "kimi-k2"};
  return names;
}

// A golden tensor's elements (copied: safetensors views may be unaligned).
template <typename T>
std::vector<T> read(const SafetensorsFile& file, const std::string& name) {
  auto t = file.tensor(name);
  EXPECT_TRUE(t.has_value()) << name << ": " << t.status().to_string();
  if (!t) return {};
  std::vector<T> out(static_cast<size_t>(t->numel()));
  std::memcpy(out.data(), t->raw_data(), out.size() * sizeof(T));
  return out;
}

struct Errors {
  double max_rel_l2 = 0.0;
  double max_abs = 0.0;
  void add(const std::vector<float>& got, const std::vector<float>& want) {
    max_rel_l2 = std::max(max_rel_l2, testing::rel_l2(got, want));
    max_abs = std::max(max_abs, testing::max_abs_diff(got, want));
  }
};

class GoldenForward : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenForward, MatchesTransformers) {
  const std::string name = GetParam();
  const auto dir = std::filesystem::path(LOCUS_TEST_DATA_DIR) / "models" / name;
  ASSERT_TRUE(std::filesystem::exists(dir / "golden.safetensors"))
      << "golden fixture " << dir.string()
      << " is missing: regenerate it with tools/golden/models/make_fixtures.py (see its README)";

  auto config = load_model_config(dir);
  ASSERT_TRUE(config.has_value()) << config.status().to_string();
  auto weights = CheckpointWeights::open(dir);
  ASSERT_TRUE(weights.has_value()) << weights.status().to_string();
  auto golden = SafetensorsFile::open(dir / "golden.safetensors");
  ASSERT_TRUE(golden.has_value()) << golden.status().to_string();
  ASSERT_TRUE(golden->metadata().contains("num_prompts"));
  const int num_prompts = std::stoi(golden->metadata().at("num_prompts"));

  testing::Prompts prompts;
  std::vector<std::vector<float>> want_logits;
  testing::Prompts want_greedy;
  for (int i = 0; i < num_prompts; ++i) {
    prompts.push_back(read<int32_t>(*golden, "prompt." + std::to_string(i)));
    want_logits.push_back(read<float>(*golden, "logits." + std::to_string(i)));
    want_greedy.push_back(read<int32_t>(*golden, "greedy." + std::to_string(i)));
  }

  CpuBackend backend;
  auto model = Model::load(*config, **weights, backend);
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  size_t longest = 0;
  for (int i = 0; i < num_prompts; ++i)
    longest = std::max(longest, prompts[static_cast<size_t>(i)].size() +
                                    want_greedy[static_cast<size_t>(i)].size());
  testing::Driver driver{**model, 16, static_cast<int64_t>(longest)};

  // All prompts in one batch, then in chunks of 5, then each alone.
  Errors batched, chunked, alone;
  const auto got_batched = driver.prefill_logits(prompts, 0);
  const auto got_chunked = driver.prefill_logits(prompts, 5);
  const auto got_alone = driver.prefill_logits_alone(prompts, 0);
  ASSERT_EQ(got_batched.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(got_batched[i].size(), want_logits[i].size()) << "prompt " << i;
    batched.add(got_batched[i], want_logits[i]);
    chunked.add(got_chunked[i], want_logits[i]);
    alone.add(got_alone[i], want_logits[i]);
    EXPECT_LT(testing::rel_l2(got_batched[i], want_logits[i]), kMaxRelL2) << "prompt " << i;
    EXPECT_LT(testing::rel_l2(got_chunked[i], want_logits[i]), kMaxRelL2) << "prompt " << i;
    EXPECT_LT(testing::rel_l2(got_alone[i], want_logits[i]), kMaxRelL2) << "prompt " << i;
    // Scheduling must not matter beyond f32 rounding of the GEMMs.
    EXPECT_LT(testing::rel_l2(got_chunked[i], got_batched[i]), 1e-5) << "prompt " << i;
    EXPECT_LT(testing::rel_l2(got_alone[i], got_batched[i]), 1e-5) << "prompt " << i;
  }

  // Greedy continuation, all prompts decoding together.
  const auto got_greedy = driver.greedy(prompts, static_cast<int64_t>(want_greedy[0].size()));
  int mismatched = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got_greedy[i], want_greedy[i]) << "greedy continuation of prompt " << i;
    mismatched += got_greedy[i] == want_greedy[i] ? 0 : 1;
  }

  std::printf(
      "[golden] %-16s logits rel L2 / max abs error: batched %.2e / %.2e, chunked %.2e / "
      "%.2e, alone %.2e / %.2e; greedy %zu x %zu tokens %s\n",
      name.c_str(), batched.max_rel_l2, batched.max_abs, chunked.max_rel_l2, chunked.max_abs,
      alone.max_rel_l2, alone.max_abs, prompts.size(), want_greedy[0].size(),
      mismatched == 0 ? "identical" : "DIFFER");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenForward, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace locus
