// A kernel that keeps the GPU busy for a while: the op profiler queues it before each op's start
// event, so by the time the GPU reaches the event the op's kernels are all queued and the
// measured interval is their execution alone, not the host's launch latency.
#include "backend/cuda/kernels/elementwise/elementwise_launch.h"

namespace locus::cuda {
namespace {

__global__ void gpu_sleep_kernel(unsigned nanoseconds) {
  const long long start = clock64();
  // ~1.9 GHz SM clock: ns -> cycles, conservatively.
  const long long cycles = static_cast<long long>(nanoseconds) * 2;
  while (clock64() - start < cycles) {
    __nanosleep(1000);
  }
}

}  // namespace

cudaError_t launch_gpu_sleep(unsigned nanoseconds, cudaStream_t stream) {
  gpu_sleep_kernel<<<1, 32, 0, stream>>>(nanoseconds);
  return cudaGetLastError();
}

}  // namespace locus::cuda
