// Launcher of the low-latency exchange's send plan.
#include "backend/cuda/kernels/moe/moe_dispatch.cuh"
#include "backend/cuda/kernels/moe/moe_launch.h"

namespace locus::cuda {

cudaError_t launch_moe_dispatch_plan(const int32_t* ids, const float* weights, int tokens, int k,
                                     const int32_t* owner, int experts, int ranks, int capacity,
                                     int32_t* send_index, int32_t* send_ids, float* send_weights,
                                     int32_t* combine_index, cudaStream_t stream) {
  if (tokens < 0 || k < 1 || experts < 1 || ranks < 1 || capacity < tokens) {
    return cudaErrorInvalidValue;
  }
  if (capacity == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  moe::moe_dispatch_plan_kernel<kThreads>
      <<<ranks, kThreads, 0, stream>>>(ids, weights, tokens, k, owner, experts, capacity,
                                       send_index, send_ids, send_weights, combine_index);
  return cudaGetLastError();
}

}  // namespace locus::cuda
