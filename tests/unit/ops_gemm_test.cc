// The linear op of the CPU backend against a plain f64 formula: f32, bf16 and fp8 block-scaled
// weights, both GEMM engines, strided inputs, and exact batch invariance of the invariant engine.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "core/float_convert.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

using testing::from_floats;
using testing::max_abs_diff;
using testing::random_f32;
using testing::rel_l2;
using testing::to_floats;

// y[i][j] = sum_l x[i][l] * w[j][l] + b[j] in f64; x, w given as f32 values.
std::vector<float> naive_linear(const std::vector<float>& x, const std::vector<float>& w,
                                const std::vector<float>& bias, int64_t m, int64_t n, int64_t k) {
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias.empty() ? 0.0 : bias[static_cast<size_t>(j)];
      for (int64_t l = 0; l < k; ++l)
        acc += static_cast<double>(x[static_cast<size_t>(i * k + l)]) *
               static_cast<double>(w[static_cast<size_t>(j * k + l)]);
      y[static_cast<size_t>(i * n + j)] = static_cast<float>(acc);
    }
  }
  return y;
}

class GemmEngines : public ::testing::TestWithParam<cpu::GemmEngine> {
 protected:
  CpuBackend backend_{CpuBackendOptions{GetParam(), 2, 0}};
};

TEST_P(GemmEngines, F32WeightsWithBiasMatchTheFormula) {
  for (auto [m, n, k] : {std::tuple{1, 7, 5}, {5, 23, 37}, {33, 130, 257}}) {
    Tensor x = random_f32({m, k}, 11 + m);
    LinearWeight w;
    w.weight = random_f32({n, k}, 12 + n);
    w.bias = random_f32({n}, 13 + k);
    Tensor out = Tensor::empty({m, n}, DType::kF32).value();
    ASSERT_TRUE(backend_.linear(x, w, out).is_ok());
    auto expected = naive_linear(to_floats(x), to_floats(w.weight), to_floats(w.bias), m, n, k);
    EXPECT_LT(rel_l2(to_floats(out), expected), 1e-6) << m << "x" << n << "x" << k;
    EXPECT_LT(max_abs_diff(to_floats(out), expected), 1e-5);
  }
}

TEST_P(GemmEngines, Bf16WeightsAndActivationsAreWidenedExactly) {
  const int64_t m = 6, n = 19, k = 40;
  Tensor x16 = testing::convert_to(random_f32({m, k}, 21), DType::kBF16);
  LinearWeight w;
  w.weight = testing::convert_to(random_f32({n, k}, 22), DType::kBF16);
  Tensor out = Tensor::empty({m, n}, DType::kF32).value();
  ASSERT_TRUE(backend_.linear(x16, w, out).is_ok());
  auto expected = naive_linear(to_floats(testing::widen(x16)), to_floats(testing::widen(w.weight)),
                               {}, m, n, k);
  EXPECT_LT(rel_l2(to_floats(out), expected), 1e-6);

  // Preparing the weight (bf16 -> f32 once) changes nothing.
  LinearWeight prepared = backend_.prepare_linear(w).value();
  EXPECT_EQ(prepared.weight.dtype(), DType::kF32);
  Tensor out2 = Tensor::empty({m, n}, DType::kF32).value();
  ASSERT_TRUE(backend_.linear(x16, prepared, out2).is_ok());
  EXPECT_TRUE(testing::bitwise_equal(to_floats(out), to_floats(out2)));
}

// fp8 e4m3 codes times one inverse scale per 128 x 128 block; 200 x 300 has partial blocks on
// both edges (rows 128..199, columns 256..299), each with its own scale.
TEST_P(GemmEngines, Fp8BlockScaledWeightsDequantizePerBlock) {
  const int64_t m = 4, n = 200, k = 300;
  LinearWeight w;
  w.weight = testing::convert_to(random_f32({n, k}, 31, -448.0f, 448.0f), DType::kF8E4M3);
  w.scale_inv = random_f32({2, 3}, 32, 1e-4f, 1e-2f);
  w.block_out = 128;
  w.block_in = 128;
  Tensor x = random_f32({m, k}, 33);

  std::vector<float> dense(static_cast<size_t>(n * k));
  const auto* codes = w.weight.data<uint8_t>();
  const auto scales = to_floats(w.scale_inv);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      dense[static_cast<size_t>(i * k + j)] =
          e4m3_to_f32(codes[i * k + j]) * scales[static_cast<size_t>((i / 128) * 3 + j / 128)];
    }
  }
  auto expected = naive_linear(to_floats(x), dense, {}, m, n, k);

  Tensor out = Tensor::empty({m, n}, DType::kF32).value();
  ASSERT_TRUE(backend_.linear(x, w, out).is_ok());
  EXPECT_LT(rel_l2(to_floats(out), expected), 1e-6);

  LinearWeight prepared = backend_.prepare_linear(w).value();
  EXPECT_EQ(prepared.weight.dtype(), DType::kF32);
  EXPECT_TRUE(testing::bitwise_equal(to_floats(prepared.weight), dense));
}

TEST_P(GemmEngines, StridedRowViewInput) {
  const int64_t m = 5, n = 9, k = 16;
  Tensor wide = random_f32({m, k + 7}, 41);
  Tensor x = wide.slice(1, 3, 3 + k).value();
  LinearWeight w;
  w.weight = random_f32({n, k}, 42);
  Tensor out = Tensor::empty({m, n}, DType::kF32).value();
  ASSERT_TRUE(backend_.linear(x, w, out).is_ok());
  auto expected = naive_linear(to_floats(x), to_floats(w.weight), {}, m, n, k);
  EXPECT_LT(rel_l2(to_floats(out), expected), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Cpu, GemmEngines,
                         ::testing::Values(cpu::GemmEngine::kOpenBlas,
                                           cpu::GemmEngine::kBatchInvariant),
                         [](const ::testing::TestParamInfo<cpu::GemmEngine>& param_info) {
                           return param_info.param == cpu::GemmEngine::kOpenBlas ? "OpenBlas"
                                                                                 : "BatchInvariant";
                         });

// The batch-invariant engine computes a row identically whether it is alone or at any
// position of any batch (OpenBLAS does not: its kernels depend on the row count).
TEST(GemmBatchInvariance, RowResultsAreBitIdenticalAcrossBatches) {
  CpuBackend backend(CpuBackendOptions{cpu::GemmEngine::kBatchInvariant, 2, 0});
  const int64_t n = 300, k = 257;
  LinearWeight w;
  w.weight = random_f32({n, k}, 51);
  Tensor batch = random_f32({40, k}, 52);
  Tensor all = Tensor::empty({40, n}, DType::kF32).value();
  ASSERT_TRUE(backend.linear(batch, w, all).is_ok());
  for (int64_t row : {0, 7, 39}) {
    Tensor one = batch.slice(0, row, row + 1).value();
    Tensor out = Tensor::empty({1, n}, DType::kF32).value();
    ASSERT_TRUE(backend.linear(one, w, out).is_ok());
    EXPECT_TRUE(
        testing::bitwise_equal(to_floats(out), to_floats(all.slice(0, row, row + 1).value())))
        << "row " << row;
  }
}

TEST(GemmErrors, ShapeMismatchesNameTheShapes) {
  CpuBackend backend;
  LinearWeight w;
  w.weight = random_f32({8, 10}, 61);
  Tensor x = random_f32({4, 12}, 62);
  Tensor out = Tensor::empty({4, 8}, DType::kF32).value();
  Status s = backend.linear(x, w, out);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("f32[4, 12]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("f32[8, 10]"), std::string::npos) << s.message();

  LinearWeight fp8;
  fp8.weight = testing::convert_to(random_f32({200, 10}, 63), DType::kF8E4M3);
  fp8.scale_inv = random_f32({1, 1}, 64);
  fp8.block_out = 128;
  fp8.block_in = 128;
  s = backend.prepare_linear(fp8).status();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("scale_inv [2, 1]"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace locus
