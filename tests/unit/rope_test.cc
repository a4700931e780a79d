// RoPE: the frequencies (plain, linear, YaRN with DeepSeek's mscale) against the formulas in f64,
// and the rotation op (neox, interleaved, partial, strided, attention factor) against a direct
// evaluation, plus the property that makes it a *relative* position encoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops_rope.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

using testing::from_i32;
using testing::random_f32;
using testing::to_floats;

RopeConfig make_rope(int64_t dim, double theta) {
  RopeConfig rope;
  rope.rotary_dim = dim;
  rope.theta = theta;
  return rope;
}

TEST(RopeFrequencies, DefaultAndLinear) {
  RopeConfig rope = make_rope(64, 10000.0);
  auto f = compute_rope_frequencies(rope, 4096).value();
  ASSERT_EQ(f.inv_freq.size(), 32u);
  EXPECT_EQ(f.attention_factor, 1.0f);
  for (size_t i = 0; i < 32; ++i) {
    const double expected = 1.0 / std::pow(10000.0, 2.0 * static_cast<double>(i) / 64.0);
    EXPECT_NEAR(f.inv_freq[i] / expected, 1.0, 1e-6) << i;
  }
  rope.scaling.type = RopeScalingType::kLinear;
  rope.scaling.factor = 4.0;
  auto g = compute_rope_frequencies(rope, 4096).value();
  for (size_t i = 0; i < 32; ++i)
    EXPECT_NEAR(g.inv_freq[i] / (f.inv_freq[i] / 4.0), 1.0, 1e-6) << i;
}

// YaRN as in DeepSeek-V3's config: dims below the fast boundary keep their frequency, dims past
// the slow boundary are divided by the factor, a linear ramp blends the ones in between.
TEST(RopeFrequencies, YarnMatchesTheFormula) {
  RopeConfig rope = make_rope(64, 10000.0);
  rope.scaling.type = RopeScalingType::kYarn;
  rope.scaling.factor = 40.0;
  rope.scaling.original_max_position_embeddings = 4096;
  rope.scaling.mscale = 1.0;
  rope.scaling.mscale_all_dim = 1.0;
  auto f = compute_rope_frequencies(rope, 163840).value();
  EXPECT_EQ(f.attention_factor, 1.0f);  // mscale / mscale_all_dim cancel

  auto correction_dim = [](double rotations) {
    return 64.0 * std::log(4096.0 / (rotations * 2 * std::numbers::pi)) / (2 * std::log(10000.0));
  };
  const double low = std::floor(correction_dim(32.0));  // 10
  const double high = std::ceil(correction_dim(1.0));   // 23
  ASSERT_EQ(low, 10.0);
  ASSERT_EQ(high, 23.0);
  for (size_t i = 0; i < 32; ++i) {
    const double base = 1.0 / std::pow(10000.0, 2.0 * static_cast<double>(i) / 64.0);
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double expected = base / 40.0 * ramp + base * (1.0 - ramp);
    EXPECT_NEAR(f.inv_freq[i] / expected, 1.0, 2e-6) << i;
  }

  // Without DeepSeek's mscale pair the paper's 0.1 ln(s) + 1 scales cos and sin.
  rope.scaling.mscale.reset();
  auto g = compute_rope_frequencies(rope, 163840).value();
  EXPECT_FLOAT_EQ(g.attention_factor, static_cast<float>(0.1 * std::log(40.0) + 1.0));
  rope.scaling.mscale = 0.5;
  auto h = compute_rope_frequencies(rope, 163840).value();
  EXPECT_FLOAT_EQ(h.attention_factor,
                  static_cast<float>((0.05 * std::log(40.0) + 1.0) / (0.1 * std::log(40.0) + 1.0)));
  rope.scaling.attention_factor = 0.75;
  EXPECT_EQ(compute_rope_frequencies(rope, 163840).value().attention_factor, 0.75f);
  // Missing original_max_position_embeddings falls back to max_position_embeddings.
  rope.scaling.original_max_position_embeddings.reset();
  auto k = compute_rope_frequencies(rope, 4096).value();
  for (size_t i = 0; i < 32; ++i)
    EXPECT_EQ(k.inv_freq[i], f.inv_freq[i]);
}

TEST(RopeFrequencies, UnsupportedScalingIsAnError) {
  RopeConfig rope = make_rope(64, 10000.0);
  rope.scaling.type = RopeScalingType::kDynamic;
  rope.scaling.factor = 2.0;
  auto f = compute_rope_frequencies(rope, 4096);
  ASSERT_FALSE(f.has_value());
  EXPECT_EQ(f.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(f.status().message().find("dynamic"), std::string::npos);
}

RopeParams params_for(const RopeConfig& rope, RopeLayout layout, float attention_factor = 1.0f) {
  auto f = compute_rope_frequencies(rope, 4096).value();
  RopeParams p;
  p.inv_freq = testing::from_floats(f.inv_freq, {static_cast<int64_t>(f.inv_freq.size())});
  p.layout = layout;
  p.attention_factor = attention_factor;
  return p;
}

// Direct evaluation: pair (a, b) of head dims rotated by angle pos * inv_freq[i].
std::vector<float> naive_rope(const std::vector<float>& x, const std::vector<int32_t>& pos,
                              const RopeParams& p, int64_t heads, int64_t head_dim) {
  std::vector<float> out = x;
  const auto freq = to_floats(p.inv_freq);
  const int64_t half = p.rotary_dim() / 2;
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const size_t base =
          (t * static_cast<size_t>(heads) + static_cast<size_t>(h)) * static_cast<size_t>(head_dim);
      for (int64_t i = 0; i < half; ++i) {
        // The angle is an f32 product, as transformers computes it (inv_freq @ positions in
        // f32): at position 4095 the rounding of the angle alone is ~1e-4 rad.
        const double angle =
            static_cast<double>(freq[static_cast<size_t>(i)] * static_cast<float>(pos[t]));
        const double c = std::cos(angle) * p.attention_factor;
        const double s = std::sin(angle) * p.attention_factor;
        const size_t a = base + static_cast<size_t>(p.layout == RopeLayout::kNeox ? i : 2 * i);
        const size_t b =
            base + static_cast<size_t>(p.layout == RopeLayout::kNeox ? i + half : 2 * i + 1);
        out[a] = static_cast<float>(x[a] * c - x[b] * s);
        out[b] = static_cast<float>(x[b] * c + x[a] * s);
      }
    }
  }
  return out;
}

TEST(RopeOp, NeoxInterleavedAndPartialMatchTheRotation) {
  CpuBackend backend;
  const std::vector<int32_t> pos = {0, 1, 7, 130, 4095};
  for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kInterleaved}) {
    for (int64_t rotary : {int64_t{32}, int64_t{16}}) {  // full and partial (GLM: half)
      RopeParams p = params_for(make_rope(rotary, 10000.0), layout, 1.25f);
      Tensor x = random_f32({5, 3, 32}, 100 + rotary);
      auto before = to_floats(x);
      ASSERT_TRUE(backend.rope(x, from_i32(pos, {5}), p).is_ok());
      auto expected = naive_rope(before, pos, p, 3, 32);
      EXPECT_LT(testing::max_abs_diff(to_floats(x), expected), 2e-6)
          << rope_layout_name(layout) << " rotary " << rotary;
    }
  }
}

TEST(RopeOp, RotatesAStridedSliceInPlace) {
  // MLA: q is [T, H, nope + rope] and only the trailing rope dims rotate.
  CpuBackend backend;
  Tensor q = random_f32({4, 2, 24}, 7);
  auto before = to_floats(q);
  Tensor q_pe = q.slice(2, 16, 24).value();
  RopeParams p = params_for(make_rope(8, 10000.0), RopeLayout::kInterleaved);
  const std::vector<int32_t> pos = {3, 4, 5, 6};
  auto pe_before = to_floats(q_pe);
  ASSERT_TRUE(backend.rope(q_pe, from_i32(pos, {4}), p).is_ok());
  auto expected_pe = naive_rope(pe_before, pos, p, 2, 8);
  EXPECT_LT(testing::max_abs_diff(to_floats(q_pe), expected_pe), 2e-6);
  auto after = to_floats(q);
  for (size_t i = 0; i < after.size(); ++i) {
    if (i % 24 < 16) {
      EXPECT_EQ(after[i], before[i]) << i;  // the nope part is untouched
    }
  }
}

// q.k after rope depends only on the distance between the two positions.
TEST(RopeOp, DotProductsDependOnRelativePosition) {
  CpuBackend backend;
  RopeParams p = params_for(make_rope(64, 10000.0), RopeLayout::kNeox);
  Tensor q = random_f32({1, 1, 64}, 8);
  Tensor k = random_f32({1, 1, 64}, 9);
  auto dot_at = [&](int32_t qp, int32_t kp) {
    Tensor qc = testing::from_floats(to_floats(q), {1, 1, 64});
    Tensor kc = testing::from_floats(to_floats(k), {1, 1, 64});
    EXPECT_TRUE(backend.rope(qc, from_i32({qp}, {1}), p).is_ok());
    EXPECT_TRUE(backend.rope(kc, from_i32({kp}, {1}), p).is_ok());
    double d = 0;
    auto a = to_floats(qc);
    auto b = to_floats(kc);
    for (size_t i = 0; i < 64; ++i)
      d += static_cast<double>(a[i]) * b[i];
    return d;
  };
  const double d0 = dot_at(10, 3);
  EXPECT_NEAR(dot_at(17, 10), d0, 1e-4 * std::fabs(d0) + 1e-5);
  EXPECT_NEAR(dot_at(1000, 993), d0, 1e-4 * std::fabs(d0) + 1e-5);
}

TEST(RopeOp, RejectsRotaryWiderThanTheHead) {
  CpuBackend backend;
  RopeParams p = params_for(make_rope(64, 10000.0), RopeLayout::kNeox);
  Tensor x = random_f32({2, 1, 32}, 10);
  Status s = backend.rope(x, from_i32({0, 1}, {2}), p);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("rotary_dim 64"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace locus
