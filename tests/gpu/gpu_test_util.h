// Shared by the GPU tests: CUDA call checks for the tests that call kernel launchers directly,
// and one backend per GPU for the multi-GPU tests.
#pragma once

#include <gtest/gtest.h>

#ifdef LOCUS_HAS_CUDA
#include <memory>
#include <vector>

#include "backend/cuda/runtime/cuda_backend.h"
#endif

// Fails the test (and returns) when a CUDA runtime call does not return cudaSuccess.
#define CUDA_ASSERT(call)                                        \
  do {                                                           \
    const cudaError_t cuda_assert_err = (call);                  \
    ASSERT_EQ(cuda_assert_err, cudaSuccess)                      \
        << #call << ": " << cudaGetErrorString(cuda_assert_err); \
  } while (0)

#ifdef LOCUS_HAS_CUDA
namespace locus::testing {

// Backends on GPUs 0..n-1, rank r on cuda:r (the layout NcclCommunicator::create_local_group
// and `--tensor-parallel-size` use), each allowed a fifth of its GPU.
struct GpuGroup {
  std::vector<std::unique_ptr<CudaBackend>> owned;
  std::vector<CudaBackend*> gpus;

  static Expected<GpuGroup> create(int n) {
    GpuGroup group;
    for (int d = 0; d < n; ++d) {
      CudaBackendOptions o;
      o.device_index = d;
      o.gpu_memory_utilization = 0.2;
      LOCUS_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::create(o));
      group.gpus.push_back(b.get());
      group.owned.push_back(std::move(b));
    }
    return group;
  }
};

}  // namespace locus::testing
#endif
