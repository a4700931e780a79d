// Launcher of the remote-expert masking kernel (expert parallelism).
#include "backend/cuda/kernels/moe/moe_launch.h"
#include "backend/cuda/kernels/moe/moe_local_ids.cuh"

namespace locus::cuda {

cudaError_t launch_moe_local_ids(const int32_t* ids, const int32_t* local_of, int n,
                                 int num_experts, int32_t* out, cudaStream_t stream) {
  if (n < 0 || num_experts < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (ids == nullptr || local_of == nullptr || out == nullptr) return cudaErrorInvalidValue;
  constexpr int kThreads = 256;
  moe::moe_local_ids_kernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      ids, local_of, n, num_experts, out);
  return cudaGetLastError();
}

}  // namespace locus::cuda
