// core/float_convert.h against the GPU: CUDA's conversion routines on every f32 input, and the
// conversion kernels against the CPU twin. SKIPPED where no GPU is present.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/device.h"
#include "core/convert.h"

#ifdef LOCUS_HAS_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/kernels/convert/convert_launch.h"
#include "gpu/cuda_intrinsics_check.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA

TEST(GpuFloatConvert, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

bool has_gpu(std::string& reason) {
  DeviceReport report = query_devices();
  reason = report.cuda_unavailable_reason;
  return !report.gpus.empty();
}

TEST(GpuFloatConvert, EveryF32InputMatchesCudaConversions) {
  std::string reason;
  if (!has_gpu(reason)) GTEST_SKIP() << "no CUDA GPU: " << reason;
  std::string error;
  auto checks = gpu_test::run_exhaustive_conversion_checks(error);
  ASSERT_FALSE(checks.empty()) << error;
  for (const auto& c : checks) {
    std::printf("  %-22s %12llu inputs, %llu mismatches\n", c.name.c_str(),
                static_cast<unsigned long long>(c.inputs),
                static_cast<unsigned long long>(c.mismatches));
    EXPECT_EQ(c.mismatches, 0u) << c.name << ": first at input 0x" << std::hex << c.first_input
                                << " locus 0x" << c.locus_output << " cuda 0x" << c.cuda_output;
  }
}

struct Format {
  cuda::NarrowFormat gpu;
  DType cpu;
};

// Random f32 values of every magnitude (random bit patterns, NaN and inf included) through
// the GPU kernels and the CPU converter: encoded bytes and decoded floats must be identical.
TEST(GpuFloatConvert, KernelsMatchTheCpuConverter) {
  std::string reason;
  if (!has_gpu(reason)) GTEST_SKIP() << "no CUDA GPU: " << reason;
  const size_t n = 1 << 20;
  std::mt19937 rng(1234);
  std::vector<float> input(n);
  for (auto& x : input) {
    uint32_t bits = rng();
    std::memcpy(&x, &bits, sizeof(x));
  }
  for (size_t i = 0; i < 1024; ++i)
    input[i] = std::uniform_real_distribution<float>(-8, 8)(rng);

  float* d_in = nullptr;
  void* d_narrow = nullptr;
  float* d_out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_in), n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_narrow, n * sizeof(uint16_t)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_out), n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_in, input.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);

  for (Format f : {Format{cuda::NarrowFormat::kBF16, DType::kBF16},
                   Format{cuda::NarrowFormat::kF16, DType::kF16},
                   Format{cuda::NarrowFormat::kF8E4M3, DType::kF8E4M3},
                   Format{cuda::NarrowFormat::kF8E5M2, DType::kF8E5M2},
                   Format{cuda::NarrowFormat::kF4E2M1, DType::kF4E2M1}}) {
    SCOPED_TRACE(std::string(dtype_name(f.cpu)));
    const size_t bytes = dtype_bytes(f.cpu, n);
    std::vector<uint8_t> cpu_narrow(bytes), gpu_narrow(bytes, 0xAB);
    ASSERT_TRUE(convert_from_f32(input.data(), f.cpu, cpu_narrow.data(), n).is_ok());
    ASSERT_EQ(cudaMemset(d_narrow, 0xAB, bytes), cudaSuccess);  // poison: every byte is written
    ASSERT_EQ(cuda::convert_from_f32(d_in, f.gpu, d_narrow, n, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(gpu_narrow.data(), d_narrow, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(cpu_narrow.data(), gpu_narrow.data(), bytes), 0);

    std::vector<float> cpu_back(n), gpu_back(n);
    ASSERT_TRUE(convert_to_f32(f.cpu, cpu_narrow.data(), cpu_back.data(), n).is_ok());
    ASSERT_EQ(cuda::convert_to_f32(d_narrow, f.gpu, d_out, n, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(gpu_back.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(std::memcmp(cpu_back.data(), gpu_back.data(), n * sizeof(float)), 0);
  }
  cudaFree(d_in);
  cudaFree(d_narrow);
  cudaFree(d_out);
}

#endif

}  // namespace
}  // namespace locus
