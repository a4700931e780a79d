// Programmatic dependent launch (sm_90): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start before the previous kernel in
// the stream has finished. It must call pdl_wait() before it reads anything that kernel (or an
// earlier one) writes, and before it writes anything they read; work on constant data (weights)
// can go first. pdl_launch_dependents() lets the next such kernel start early. Both are no-ops
// for kernels launched without the attribute.
#pragma once

namespace locus::cuda {

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace locus::cuda
