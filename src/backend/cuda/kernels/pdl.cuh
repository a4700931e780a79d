// Programmatic dependent launch (sm_90): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start before the previous kernel in
// the stream has finished. It must call pdl_wait() before it reads anything that kernel (or an
// earlier one) writes, and before it writes anything they read; work on constant data (weights)
// can go first. pdl_launch_dependents() lets the next such kernel start early. Both are no-ops
// for kernels launched without the attribute. A kernel that calls pdl_launch_dependents() only
// after its own pdl_wait() lets its dependent read, before waiting, what the kernels before it
// wrote (read past L1: __ldcg); the MoE down GEMV relies on that for the routing.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace locus::cuda {

// Whether launch_pdl sets the attribute; LOCUS_CUDA_PDL=0 turns it off (to measure it).
bool pdl_enabled();

// Launches `kernel` as a programmatic dependent of the previous kernel in the stream. Rule for
// every kernel launched this way: call pdl_wait() before reading or writing anything an
// earlier kernel touches, in every CTA (a kernel that skipped it could finish before its
// predecessor, and the kernel after it would then wait on the wrong one).
template <typename... Params, typename... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                       cudaStream_t stream, Args&&... args) {
  if (!pdl_enabled()) {
    kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
    return cudaGetLastError();
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

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
