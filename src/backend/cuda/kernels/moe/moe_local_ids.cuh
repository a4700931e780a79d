// Expert parallelism on GPUs: a rank holds some experts, and the routing names all of them.
// The expert kernels skip ids outside [0, num_experts) (moe_align.cuh, the GEMV path), so the
// routed ids of experts held by other ranks are turned into -1 before they run.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace locus::cuda::moe {

// out[i] = local_of[ids[i]] for ids in [0, num_experts), else -1. local_of[e] is e for an expert
// this rank holds and -1 for one on another rank.
static __global__ void moe_local_ids_kernel(const int32_t* __restrict__ ids,
                                            const int32_t* __restrict__ local_of, int n,
                                            int num_experts, int32_t* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int e = ids[i];
  out[i] = e >= 0 && e < num_experts ? local_of[e] : -1;
}

}  // namespace locus::cuda::moe
