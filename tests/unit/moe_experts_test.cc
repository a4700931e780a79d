// MoE experts + weighted combine against a per-token f64 evaluation of each chosen expert's
// gated MLP, with mixed weight dtypes, and the range check on expert ids.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

using testing::from_i32;
using testing::random_f32;
using testing::to_floats;

constexpr int64_t kHidden = 12, kWidth = 7, kExperts = 5, kTopK = 2, kTokens = 6;

std::vector<double> apply_linear(const LinearWeight& w, const std::vector<double>& x) {
  const auto m = to_floats(testing::widen(w.weight));
  std::vector<double> y(static_cast<size_t>(w.out_features()), 0.0);
  for (int64_t i = 0; i < w.out_features(); ++i)
    for (int64_t j = 0; j < w.in_features(); ++j)
      y[static_cast<size_t>(i)] +=
          m[static_cast<size_t>(i * w.in_features() + j)] * x[static_cast<size_t>(j)];
  return y;
}

std::vector<double> expert_mlp(const ExpertWeights& e, const std::vector<double>& x) {
  auto g = apply_linear(e.gate, x);
  auto u = apply_linear(e.up, x);
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return apply_linear(e.down, g);
}

TEST(MoeExperts, WeightedSumOfChosenExpertsPerToken) {
  CpuBackend backend;
  std::vector<ExpertWeights> experts(kExperts);
  uint64_t seed = 800;
  for (int64_t e = 0; e < kExperts; ++e) {
    auto& w = experts[static_cast<size_t>(e)];
    w.gate.weight = random_f32({kWidth, kHidden}, ++seed);
    w.up.weight = random_f32({kWidth, kHidden}, ++seed);
    w.down.weight = random_f32({kHidden, kWidth}, ++seed);
    if (e == 2) w.up.weight = testing::convert_to(w.up.weight, DType::kBF16);  // unprepared bf16
  }
  // Expert 4 gets no token; expert 1 gets most.
  const std::vector<int32_t> ids = {1, 3, 0, 1, 1, 2, 3, 1, 2, 0, 1, 3};
  Tensor topk_ids = from_i32(ids, {kTokens, kTopK});
  Tensor topk_weights = random_f32({kTokens, kTopK}, 900, 0.1f, 1.0f);
  Tensor x = random_f32({kTokens, kHidden}, 901);
  Tensor out = Tensor::empty({kTokens, kHidden}, DType::kF32).value();
  ASSERT_TRUE(backend.moe_experts(x, topk_ids, topk_weights, experts, out).is_ok());

  const auto xv = to_floats(x);
  const auto wv = to_floats(topk_weights);
  std::vector<float> expected;
  for (int64_t t = 0; t < kTokens; ++t) {
    std::vector<double> row(xv.begin() + t * kHidden, xv.begin() + (t + 1) * kHidden);
    std::vector<double> acc(kHidden, 0.0);
    for (int64_t j = 0; j < kTopK; ++j) {
      auto y =
          expert_mlp(experts[static_cast<size_t>(ids[static_cast<size_t>(t * kTopK + j)])], row);
      for (int64_t d = 0; d < kHidden; ++d)
        acc[static_cast<size_t>(d)] +=
            wv[static_cast<size_t>(t * kTopK + j)] * y[static_cast<size_t>(d)];
    }
    expected.insert(expected.end(), acc.begin(), acc.end());
  }
  EXPECT_LT(testing::rel_l2(to_floats(out), expected), 1e-6);
}

TEST(MoeExperts, ExpertIdsOutsideTheTableAreErrors) {
  CpuBackend backend;
  std::vector<ExpertWeights> experts(2);
  for (auto& w : experts) {
    w.gate.weight = random_f32({kWidth, kHidden}, 1);
    w.up.weight = random_f32({kWidth, kHidden}, 2);
    w.down.weight = random_f32({kHidden, kWidth}, 3);
  }
  Tensor out = Tensor::empty({1, kHidden}, DType::kF32).value();
  Status s = backend.moe_experts(random_f32({1, kHidden}, 4), from_i32({0, 2}, {1, 2}),
                                 random_f32({1, 2}, 5), experts, out);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("routes to expert 2"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace locus
