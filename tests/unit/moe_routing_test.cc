// MoE routing against hand-computed cases: softmax top-k with and without renormalization
// (Qwen3, Mixtral, DeepSeek-V2), sigmoid with correction bias and grouped top-k (DeepSeek-V3
// noaux_tc: group = sum of top-2; V2 group_limited_greedy: group = max), scaling, ties; then
// random routers checked for the defining properties.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "backend/cpu/cpu_backend.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

using testing::from_floats;
using testing::random_f32;
using testing::to_floats;

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed route(const std::vector<float>& logits, int64_t experts, const MoeRouting& r,
             const std::vector<float>& bias = {}) {
  CpuBackend backend;
  const int64_t tokens = static_cast<int64_t>(logits.size()) / experts;
  Tensor ids = Tensor::empty({tokens, r.top_k}, DType::kI32).value();
  Tensor weights = Tensor::empty({tokens, r.top_k}, DType::kF32).value();
  Tensor bias_t = bias.empty() ? Tensor() : from_floats(bias, {experts});
  Status s = backend.moe_route(from_floats(logits, {tokens, experts}), bias_t, r, ids, weights);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  Routed out;
  out.ids.assign(ids.data<int32_t>(), ids.data<int32_t>() + ids.numel());
  out.weights = to_floats(weights);
  return out;
}

float logit_of(double sigmoid) {
  return static_cast<float>(std::log(sigmoid / (1.0 - sigmoid)));
}

TEST(MoeRouting, SoftmaxTopKWithAndWithoutRenormalization) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f, 0.0f, 1.5f};
  double z = 0;
  for (float l : logits)
    z += std::exp(static_cast<double>(l));
  MoeRouting r;
  r.top_k = 3;
  Routed plain = route(logits, 6, r);
  EXPECT_EQ(plain.ids, (std::vector<int32_t>{1, 5, 3}));
  EXPECT_NEAR(plain.weights[0], std::exp(2.0) / z, 1e-7);
  EXPECT_NEAR(plain.weights[1], std::exp(1.5) / z, 1e-7);
  EXPECT_NEAR(plain.weights[2], std::exp(1.0) / z, 1e-7);

  r.renormalize = true;
  r.routed_scaling_factor = 2.0f;
  Routed norm = route(logits, 6, r);
  const double top = std::exp(2.0) + std::exp(1.5) + std::exp(1.0);
  EXPECT_NEAR(norm.weights[0], 2.0 * std::exp(2.0) / top, 1e-6);
  EXPECT_NEAR(norm.weights[2], 2.0 * std::exp(1.0) / top, 1e-6);
}

TEST(MoeRouting, CorrectionBiasChoosesButDoesNotWeigh) {
  MoeRouting r;
  r.scoring = ScoringFunc::kSigmoid;
  r.topk_method = TopkMethod::kNoauxTc;
  r.top_k = 2;
  r.renormalize = true;
  r.routed_scaling_factor = 2.5f;
  const std::vector<float> logits = {logit_of(0.9), logit_of(0.8), logit_of(0.7), logit_of(0.2)};
  // The bias lifts expert 3 above experts 0 and 1 for selection only.
  Routed out = route(logits, 4, r, {0.0f, -0.2f, 0.0f, 0.75f});
  EXPECT_EQ(out.ids, (std::vector<int32_t>{3, 0}));  // 0.95, 0.9
  EXPECT_NEAR(out.weights[0], 2.5 * 0.2 / 1.1, 1e-6);
  EXPECT_NEAR(out.weights[1], 2.5 * 0.9 / 1.1, 1e-6);
}

TEST(MoeRouting, GroupedTopKKeepsOnlyTheBestGroups) {
  // Four groups of two. Sigmoid scores: group sums (top-2) 1.0, 1.2, 1.1, 0.2; group maxima
  // 0.95, 0.6, 0.55, 0.1.
  const std::vector<double> scores = {0.95, 0.05, 0.6, 0.6, 0.55, 0.55, 0.1, 0.1};
  std::vector<float> logits;
  for (double s : scores)
    logits.push_back(logit_of(s));
  MoeRouting r;
  r.scoring = ScoringFunc::kSigmoid;
  r.top_k = 2;
  r.n_group = 4;
  r.topk_group = 2;

  r.topk_method = TopkMethod::kNoauxTc;  // groups 1 and 2 win on top-2 sums: expert 0 is out
  EXPECT_EQ(route(logits, 8, r).ids, (std::vector<int32_t>{2, 3}));

  r.topk_method = TopkMethod::kGroupLimitedGreedy;  // groups 0 and 1 win on their maxima
  EXPECT_EQ(route(logits, 8, r).ids, (std::vector<int32_t>{0, 2}));

  r.topk_method = TopkMethod::kGreedy;  // no groups
  EXPECT_EQ(route(logits, 8, r).ids, (std::vector<int32_t>{0, 2}));
}

TEST(MoeRouting, TiesGoToTheLowerExpertId) {
  MoeRouting r;
  r.top_k = 3;
  EXPECT_EQ(route({1.0f, 3.0f, 1.0f, 3.0f, 1.0f}, 5, r).ids, (std::vector<int32_t>{1, 3, 0}));
}

// Random routers: chosen experts are distinct, lie in the topk_group best groups, and no
// eligible expert outscores a chosen one.
TEST(MoeRouting, RandomGroupedRoutingHasTheDefiningProperties) {
  const int64_t tokens = 50, experts = 16;
  MoeRouting r;
  r.scoring = ScoringFunc::kSigmoid;
  r.topk_method = TopkMethod::kNoauxTc;
  r.top_k = 4;
  r.n_group = 4;
  r.topk_group = 2;
  r.renormalize = true;
  const auto logits = to_floats(random_f32({tokens, experts}, 700, -3.0f, 3.0f));
  const auto bias = to_floats(random_f32({experts}, 701, -0.3f, 0.3f));
  Routed out = route(logits, experts, r, bias);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> choice(experts);
    for (int64_t e = 0; e < experts; ++e)
      choice[static_cast<size_t>(e)] =
          1.0 /
              (1.0 + std::exp(-static_cast<double>(logits[static_cast<size_t>(t * experts + e)]))) +
          bias[static_cast<size_t>(e)];
    std::vector<std::pair<double, int>> groups;
    for (int g = 0; g < 4; ++g) {
      std::vector<double> m(choice.begin() + g * 4, choice.begin() + g * 4 + 4);
      std::sort(m.rbegin(), m.rend());
      groups.emplace_back(m[0] + m[1], g);
    }
    std::sort(groups.rbegin(), groups.rend());
    const std::set<int> kept = {groups[0].second, groups[1].second};
    std::set<int32_t> chosen;
    double weight_sum = 0;
    double worst_chosen = 1e9;
    for (int64_t j = 0; j < r.top_k; ++j) {
      const int32_t e = out.ids[static_cast<size_t>(t * r.top_k + j)];
      chosen.insert(e);
      EXPECT_TRUE(kept.count(e / 4)) << "token " << t << " expert " << e;
      worst_chosen = std::min(worst_chosen, choice[static_cast<size_t>(e)]);
      weight_sum += out.weights[static_cast<size_t>(t * r.top_k + j)];
    }
    EXPECT_EQ(chosen.size(), 4u);
    EXPECT_NEAR(weight_sum, 1.0, 1e-5);
    for (int64_t e = 0; e < experts; ++e) {
      if (kept.count(static_cast<int>(e / 4)) && !chosen.count(static_cast<int32_t>(e))) {
        EXPECT_LE(choice[static_cast<size_t>(e)], worst_chosen) << "token " << t;
      }
    }
  }
}

TEST(MoeRouting, InvalidGroupingIsAnError) {
  CpuBackend backend;
  MoeRouting r;
  r.topk_method = TopkMethod::kNoauxTc;
  r.top_k = 2;
  r.n_group = 3;  // 8 experts do not split into 3 groups
  r.topk_group = 1;
  Tensor ids = Tensor::empty({1, 2}, DType::kI32).value();
  Tensor w = Tensor::empty({1, 2}, DType::kF32).value();
  Status s = backend.moe_route(random_f32({1, 8}, 1), Tensor(), r, ids, w);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("n_group 3"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace locus
