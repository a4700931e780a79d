// Row-wise CPU ops against their formulas: embedding, RMSNorm (plain, per head, fused add,
// strided), SiLU-and-mul, add, gather_rows; and the argument checks' messages.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

using testing::from_i32;
using testing::random_f32;
using testing::rel_l2;
using testing::to_floats;

std::vector<float> naive_rms_norm(const std::vector<float>& x, const std::vector<float>& w,
                                  int64_t n, double eps) {
  std::vector<float> out(x.size());
  for (size_t r = 0; r < x.size() / static_cast<size_t>(n); ++r) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i)
      ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i)
      out[r * n + i] = static_cast<float>(x[r * n + i] * inv * w[static_cast<size_t>(i)]);
  }
  return out;
}

TEST(OpsElementwise, EmbeddingCopiesRowsAndRejectsBadIds) {
  CpuBackend backend;
  Tensor table = random_f32({11, 6}, 1);
  Tensor ids = from_i32({3, 0, 10, 3}, {4});
  Tensor out = Tensor::empty({4, 6}, DType::kF32).value();
  ASSERT_TRUE(backend.embedding(table, ids, out).is_ok());
  auto t = to_floats(table);
  auto o = to_floats(out);
  for (int r = 0; r < 4; ++r) {
    const int id = std::vector<int>{3, 0, 10, 3}[static_cast<size_t>(r)];
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(o[static_cast<size_t>(r * 6 + i)], t[static_cast<size_t>(id * 6 + i)]);
  }
  Tensor bad = from_i32({11}, {1});
  Tensor out1 = Tensor::empty({1, 6}, DType::kF32).value();
  Status s = backend.embedding(table, bad, out1);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("token id 11"), std::string::npos) << s.message();
}

TEST(OpsElementwise, RmsNormRowsPerHeadAndStrided) {
  CpuBackend backend;
  // [T, hidden]
  Tensor x = random_f32({5, 48}, 2, -3.0f, 3.0f);
  Tensor w = random_f32({48}, 3, 0.5f, 1.5f);
  Tensor out = Tensor::empty({5, 48}, DType::kF32).value();
  ASSERT_TRUE(backend.rms_norm(x, w, 1e-6f, out).is_ok());
  EXPECT_LT(rel_l2(to_floats(out), naive_rms_norm(to_floats(x), to_floats(w), 48, 1e-6)), 1e-6);

  // [T, H, D] with a [D] weight: every head normalized on its own (Qwen3's q_norm).
  Tensor heads = random_f32({3, 4, 8}, 4);
  Tensor hw = random_f32({8}, 5, 0.5f, 1.5f);
  Tensor hout = Tensor::empty({3, 4, 8}, DType::kF32).value();
  ASSERT_TRUE(backend.rms_norm(heads, hw, 1e-5f, hout).is_ok());
  EXPECT_LT(rel_l2(to_floats(hout), naive_rms_norm(to_floats(heads), to_floats(hw), 8, 1e-5)),
            1e-6);

  // A column slice (MLA's latent inside kv_a) is a valid row view.
  Tensor wide = random_f32({6, 20}, 6);
  Tensor part = wide.slice(1, 0, 16).value();
  Tensor pw = random_f32({16}, 7);
  Tensor pout = Tensor::empty({6, 16}, DType::kF32).value();
  ASSERT_TRUE(backend.rms_norm(part, pw, 1e-6f, pout).is_ok());
  EXPECT_LT(rel_l2(to_floats(pout), naive_rms_norm(to_floats(part), to_floats(pw), 16, 1e-6)),
            1e-6);
}

TEST(OpsElementwise, AddRmsNormUpdatesResidualThenNormalizes) {
  CpuBackend backend;
  Tensor residual = random_f32({4, 32}, 8);
  Tensor x = random_f32({4, 32}, 9);
  Tensor w = random_f32({32}, 10, 0.5f, 1.5f);
  auto sum = to_floats(residual);
  auto xv = to_floats(x);
  for (size_t i = 0; i < sum.size(); ++i)
    sum[i] += xv[i];
  Tensor out = Tensor::empty({4, 32}, DType::kF32).value();
  ASSERT_TRUE(backend.add_rms_norm(residual, x, w, 1e-6f, out).is_ok());
  EXPECT_TRUE(testing::bitwise_equal(to_floats(residual), sum));
  EXPECT_LT(rel_l2(to_floats(out), naive_rms_norm(sum, to_floats(w), 32, 1e-6)), 1e-6);
  Status alias = backend.add_rms_norm(residual, x, w, 1e-6f, residual);
  EXPECT_FALSE(alias.is_ok());
}

// A row split into column parts (MiniMax-M2's q over tensor-parallel ranks): the parts' sums of
// squares added up, then each part normalized with the total, give rms_norm of the whole row.
TEST(OpsElementwise, SplitRmsNormOverPartsEqualsTheWholeRow) {
  CpuBackend backend;
  const int64_t t = 5, n = 48;
  Tensor x = random_f32({t, n}, 20, -3.0f, 3.0f);
  Tensor w = random_f32({n}, 21, 0.5f, 1.5f);
  const std::vector<int64_t> cuts = {0, 16, 24, 48};
  std::vector<float> total(static_cast<size_t>(t), 0.0f);
  for (size_t p = 0; p + 1 < cuts.size(); ++p) {
    Tensor part = x.slice(1, cuts[p], cuts[p + 1]).value();
    Tensor ss = Tensor::empty({t}, DType::kF32).value();
    ASSERT_TRUE(backend.sum_squares(part, ss).is_ok());
    const auto got = to_floats(ss);
    const auto xs = to_floats(x);
    for (int64_t r = 0; r < t; ++r) {
      double want = 0.0;
      for (int64_t c = cuts[p]; c < cuts[p + 1]; ++c)
        want += static_cast<double>(xs[static_cast<size_t>(r * n + c)]) *
                xs[static_cast<size_t>(r * n + c)];
      EXPECT_FLOAT_EQ(got[static_cast<size_t>(r)], static_cast<float>(want));
      total[static_cast<size_t>(r)] += got[static_cast<size_t>(r)];
    }
  }
  Tensor sums = testing::from_floats(total, {t});
  const auto whole = naive_rms_norm(to_floats(x), to_floats(w), n, 1e-6);
  for (size_t p = 0; p + 1 < cuts.size(); ++p) {
    const int64_t width = cuts[p + 1] - cuts[p];
    Tensor part = x.slice(1, cuts[p], cuts[p + 1]).value();
    Tensor pw = w.slice(0, cuts[p], cuts[p + 1]).value();
    Tensor out = Tensor::empty({t, width}, DType::kF32).value();
    ASSERT_TRUE(backend.split_rms_norm(part, pw, sums, n, 1e-6f, out).is_ok());
    std::vector<float> want;
    for (int64_t r = 0; r < t; ++r)
      for (int64_t c = cuts[p]; c < cuts[p + 1]; ++c)
        want.push_back(whole[static_cast<size_t>(r * n + c)]);
    EXPECT_LT(rel_l2(to_floats(out), want), 1e-6) << "part " << p;
  }
  // The whole row's width must cover the part; one sum per row.
  Tensor part = x.slice(1, 0, 16).value();
  Tensor pw = w.slice(0, 0, 16).value();
  Tensor out = Tensor::empty({t, 16}, DType::kF32).value();
  Status s = backend.split_rms_norm(part, pw, sums, 8, 1e-6f, out);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("width 8 must be at least x's 16"), std::string::npos) << s.message();
  s = backend.split_rms_norm(part, pw, testing::from_floats({1.0f, 2.0f}, {2}), n, 1e-6f, out);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("one entry per row"), std::string::npos) << s.message();
}

TEST(OpsElementwise, SiluAndMulAddGather) {
  CpuBackend backend;
  Tensor gate = random_f32({3, 10}, 11, -6.0f, 6.0f);
  Tensor up = random_f32({3, 10}, 12);
  Tensor out = Tensor::empty({3, 10}, DType::kF32).value();
  ASSERT_TRUE(backend.silu_and_mul(gate, up, out).is_ok());
  auto g = to_floats(gate);
  auto u = to_floats(up);
  std::vector<float> expected(g.size());
  for (size_t i = 0; i < g.size(); ++i)
    expected[i] = static_cast<float>(g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i]);
  EXPECT_LT(rel_l2(to_floats(out), expected), 1e-6);

  Tensor sum = Tensor::empty({3, 10}, DType::kF32).value();
  ASSERT_TRUE(backend.add(gate, up, sum).is_ok());
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_EQ(to_floats(sum)[i], g[i] + u[i]);

  Tensor rows = Tensor::empty({2, 10}, DType::kF32).value();
  ASSERT_TRUE(backend.gather_rows(gate, from_i32({2, 0}, {2}), rows).is_ok());
  auto r = to_floats(rows);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(r[i], g[20 + i]);
    EXPECT_EQ(r[10 + i], g[i]);
  }
  Status s = backend.gather_rows(gate, from_i32({3, 0}, {2}), rows);
  EXPECT_FALSE(s.is_ok());
}

TEST(OpsElementwise, ChecksNameShapesAndDtypes) {
  CpuBackend backend;
  Tensor x = random_f32({5, 48}, 13);
  Tensor w = random_f32({40}, 14);
  Tensor out = Tensor::empty({5, 48}, DType::kF32).value();
  Status s = backend.rms_norm(x, w, 1e-6f, out);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rms_norm: x f32[5, 48] cpu and weight f32[40] cpu"),
            std::string::npos)
      << s.message();

  Tensor ids64 = Tensor::empty({2}, DType::kI64).value();
  Tensor emb_out = Tensor::empty({2, 48}, DType::kF32).value();
  s = backend.embedding(random_f32({10, 48}, 15), ids64, emb_out);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("token_ids i64[2] cpu must be i32"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace locus
