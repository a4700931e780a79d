// Ops::prefetch on the CUDA backend: the L2 prefetch kernels accept every span and id they may
// be given (odd sizes, unrouted and out-of-range expert ids) without a fault, and a backend
// with LOCUS_CUDA_PREFETCH=3 gives bit-identical results to one without, eagerly and inside a
// captured graph (which must end with the side stream joined). SKIPPED where no GPU is present.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/device.h"
#include "unit/ops_test_util.h"

#ifdef LOCUS_HAS_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/kernels/prefetch/prefetch_launch.h"
#include "backend/cuda/runtime/cuda_backend.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA

TEST(GpuPrefetch, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

using testing::random_f32;

class GpuPrefetch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (query_devices().gpus.empty()) GTEST_SKIP() << "no CUDA GPU";
  }
};

TEST_F(GpuPrefetch, KernelsTakeOddSpansAndBadIds) {
  const size_t bytes = (size_t{3} << 20) + 48;
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, bytes), cudaSuccess);
  const char* b = static_cast<const char*>(buf);
  cuda::PrefetchSpans spans;
  const uint64_t sizes[] = {0, 15, 17, 16 * 1024 + 48, uint64_t{1} << 20, (uint64_t{2} << 20) - 64};
  uint64_t at = 0;
  for (uint64_t s : sizes) {
    spans.data[spans.count] = b + at;
    spans.bytes[spans.count++] = s;
    at += (s + 15) / 16 * 16;
  }
  ASSERT_LE(at, bytes);
  EXPECT_EQ(cuda::launch_l2_prefetch(spans, nullptr), cudaSuccess);
  spans.count = cuda::kPrefetchMaxSpans + 1;
  EXPECT_EQ(cuda::launch_l2_prefetch(spans, nullptr), cudaErrorInvalidValue);

  const void* table_host[2] = {b, b + (size_t{1} << 20)};
  void* table = nullptr;
  ASSERT_EQ(cudaMalloc(&table, sizeof(table_host)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(table, table_host, sizeof(table_host), cudaMemcpyHostToDevice), cudaSuccess);
  const int32_t ids_host[] = {1, -1, 0, 2, 1 << 30, 0};
  void* ids = nullptr;
  ASSERT_EQ(cudaMalloc(&ids, sizeof(ids_host)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ids, ids_host, sizeof(ids_host), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cuda::launch_l2_prefetch_experts(static_cast<const int32_t*>(ids), 6,
                                             static_cast<const void* const*>(table), 2,
                                             uint64_t{1} << 20, nullptr),
            cudaSuccess);
  EXPECT_EQ(cuda::launch_l2_prefetch_experts(static_cast<const int32_t*>(ids), 0,
                                             static_cast<const void* const*>(table), 2,
                                             uint64_t{1} << 20, nullptr),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "a prefetch faulted";
  cudaFree(ids);
  cudaFree(table);
  cudaFree(buf);
}

// One decode-sized "layer" (prefetch, linear, prefetch, experts) on a backend, eagerly then
// replayed from a graph; returns both outputs' bytes.
struct LayerRun {
  std::vector<uint8_t> eager, replayed;
};

LayerRun run_layer(CudaBackend& gpu) {
  const int64_t hidden = 512, out_features = 384, e = 8, inter = 128, k = 4;
  auto prep = [&](const Dims& shape, uint64_t seed) {
    LinearWeight w;
    w.weight = testing::convert_to(random_f32(shape, seed, -0.1f, 0.1f), DType::kBF16);
    return gpu.prepare_linear(w).value();
  };
  LinearWeight proj = prep({out_features, hidden}, 1);
  std::vector<ExpertWeights> experts;
  for (int64_t i = 0; i < e; ++i)
    experts.push_back({prep({inter, out_features}, 10 + i), prep({inter, out_features}, 20 + i),
                       prep({out_features, inter}, 30 + i)});
  Tensor x = gpu.to_device(testing::convert_to(random_f32({1, hidden}, 2), DType::kBF16)).value();
  Tensor ids_host = Tensor::empty({1, k}, DType::kI32).value();
  const int32_t chosen[] = {3, 0, 7, 5};
  std::memcpy(ids_host.raw_data(), chosen, sizeof(chosen));
  Tensor ids = gpu.to_device(ids_host).value();
  Tensor wts = gpu.to_device(random_f32({1, k}, 3, 0.1f, 0.4f)).value();
  Tensor y = gpu.empty({1, out_features}, DType::kBF16).value();
  Tensor out = gpu.empty({1, out_features}, DType::kBF16).value();
  auto body = [&]() -> Status {
    const LinearWeight* first[] = {&proj};
    LOCUS_RETURN_IF_ERROR(gpu.prefetch(first));
    LOCUS_RETURN_IF_ERROR(gpu.linear(x, proj, y));
    const LinearWeight* next[] = {&experts[1].gate, &experts[2].up};
    LOCUS_RETURN_IF_ERROR(gpu.prefetch(next));
    return gpu.moe_experts(y, ids, wts, experts, out);
  };
  LayerRun run;
  auto bytes = [&]() {
    Tensor h = gpu.to_host(out).value();
    const auto* p = static_cast<const uint8_t*>(h.raw_data());
    return std::vector<uint8_t>(p, p + h.nbytes());
  };
  EXPECT_TRUE(body().is_ok());
  run.eager = bytes();
  const std::vector<uint8_t> zero(out.nbytes(), 0);
  EXPECT_TRUE(gpu.copy_into(zero.data(), out, zero.size()).is_ok());
  auto graph = gpu.capture_graph(body);
  EXPECT_TRUE(graph.has_value()) << graph.status().to_string();
  if (graph.has_value()) {
    EXPECT_TRUE((*graph)->replay().is_ok());
    run.replayed = bytes();
  }
  return run;
}

TEST_F(GpuPrefetch, ResultsIdenticalWithPrefetchEagerAndInGraphs) {
  auto plain = CudaBackend::create();
  ASSERT_TRUE(plain.has_value()) << plain.status().to_string();
  const LayerRun want = run_layer(**plain);
  ASSERT_FALSE(want.eager.empty());
  EXPECT_EQ(want.replayed, want.eager);

  const char* old = std::getenv("LOCUS_CUDA_PREFETCH");
  const std::string saved = old != nullptr ? old : "";
  setenv("LOCUS_CUDA_PREFETCH", "3", 1);
  auto prefetching = CudaBackend::create();
  if (old != nullptr) {
    setenv("LOCUS_CUDA_PREFETCH", saved.c_str(), 1);
  } else {
    unsetenv("LOCUS_CUDA_PREFETCH");
  }
  ASSERT_TRUE(prefetching.has_value()) << prefetching.status().to_string();
  const LayerRun got = run_layer(**prefetching);
  EXPECT_EQ(got.eager, want.eager);
  EXPECT_EQ(got.replayed, want.eager);
}

#endif

}  // namespace
}  // namespace locus
