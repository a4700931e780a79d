// The low-latency expert exchange's send plan (Ops::moe_dispatch_plan), made on the GPU so that
// no count goes through the host. One CTA per destination rank walks the tokens in order; a
// block-wide scan of "does token t go to this rank" gives each token its slot in the rank's
// block, so the plan is the same as the CPU's (token order within each block).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace locus::cuda::moe {

template <int kThreads>
static __global__ void __launch_bounds__(kThreads)
    moe_dispatch_plan_kernel(const int32_t* __restrict__ ids, const float* __restrict__ weights,
                             int tokens, int k, const int32_t* __restrict__ owner, int experts,
                             int capacity, int32_t* __restrict__ send_index,
                             int32_t* __restrict__ send_ids, float* __restrict__ send_weights,
                             int32_t* __restrict__ combine_index) {
  constexpr int kWarps = kThreads / 32;
  __shared__ int warp_sums[kWarps];
  const int r = static_cast<int>(blockIdx.x);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  int used = 0;  // slots of this rank's block taken by earlier chunks (same in every thread)
  for (int t0 = 0; t0 < tokens; t0 += kThreads) {
    const int t = t0 + static_cast<int>(threadIdx.x);
    int goes = 0;
    if (t < tokens) {
      for (int j = 0; j < k; ++j) {
        const int e = ids[static_cast<int64_t>(t) * k + j];
        if (e >= 0 && e < experts && owner[e] == r) goes = 1;
      }
    }
    int inclusive = goes;
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, inclusive, o);
      if (lane >= o) inclusive += v;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    int before = 0, chunk = 0;
    for (int w = 0; w < kWarps; ++w) {
      before += w < warp ? warp_sums[w] : 0;
      chunk += warp_sums[w];
    }
    if (t < tokens) {
      int32_t* where = combine_index + static_cast<int64_t>(r) * tokens + t;
      if (goes) {
        const int64_t slot = static_cast<int64_t>(r) * capacity + used + before + inclusive - 1;
        *where = static_cast<int32_t>(slot);
        send_index[slot] = t;
        for (int j = 0; j < k; ++j) {
          send_ids[slot * k + j] = ids[static_cast<int64_t>(t) * k + j];
          send_weights[slot * k + j] = weights[static_cast<int64_t>(t) * k + j];
        }
      } else {
        *where = -1;
      }
    }
    used += chunk;
    __syncthreads();  // warp_sums is rewritten by the next chunk
  }
  for (int s = used + static_cast<int>(threadIdx.x); s < capacity; s += kThreads) {
    const int64_t slot = static_cast<int64_t>(r) * capacity + s;
    send_index[slot] = -1;
    for (int j = 0; j < k; ++j) {
      send_ids[slot * k + j] = -1;
      send_weights[slot * k + j] = 0.0f;
    }
  }
}

}  // namespace locus::cuda::moe
