// The dummy-weight fill on the GPU: the same counter-based values as model/dummy_weights.cc.
#include <cuda_bf16.h>

#include "backend/cuda/kernels/elementwise/elementwise_launch.h"
#include "core/counter_rng.h"

namespace locus::cuda {
namespace {

__global__ void random_uniform_kernel(void* out, int64_t n, uint64_t stream, float low, float high,
                                      bool round_bf16, bool store_f32) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = low + (high - low) * counter_uniform(stream, static_cast<uint64_t>(i));
    if (round_bf16) v = __bfloat162float(__float2bfloat16_rn(v));
    if (store_f32) {
      static_cast<float*>(out)[i] = v;
    } else {
      static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
    }
  }
}

}  // namespace

cudaError_t launch_random_uniform(void* out, int64_t n, uint64_t stream, float low, float high,
                                  bool round_bf16, bool store_f32, cudaStream_t cuda_stream) {
  if (n == 0) return cudaSuccess;
  random_uniform_kernel<<<132 * 16, 256, 0, cuda_stream>>>(out, n, stream, low, high, round_bf16,
                                                           store_f32);
  return cudaGetLastError();
}

}  // namespace locus::cuda
