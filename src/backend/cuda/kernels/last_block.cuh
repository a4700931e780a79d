// The last CTA of a group to finish its work, found with one atomic (the pattern of CUDA's
// threadFenceReduction sample): each CTA publishes its results, counts itself in, and the CTA
// that completes the count sees every other CTA's results and does the group's final step.
// One acq_rel atomic by one thread replaces the two full fences (__threadfence) of the sample:
// the block barrier before it orders the CTA's writes ahead of the release, and the one after
// it orders the acquire ahead of the CTA's reads (the pattern of CUTLASS's semaphores).
#pragma once

#include <cuda_runtime.h>

namespace locus::cuda {

// `sync` is a barrier over every thread of the CTA that wrote results or will read them;
// thread 0 must be one of them. Resets *counter for the next launch when it returns true.
template <typename Sync>
__device__ __forceinline__ bool last_to_arrive(int* counter, int total, Sync sync) {
  __shared__ int last;
  sync();
  if (threadIdx.x == 0) {
    int old = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;"
                 : "=r"(old)
                 : "l"(counter)
                 : "memory");
#endif
    last = old == total - 1;
    if (last) *counter = 0;
  }
  sync();
  return last;
}

}  // namespace locus::cuda
