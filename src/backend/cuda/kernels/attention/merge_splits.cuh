// Combines the split-KV partials of paged attention into the bf16 output: one CTA per
// (token, q head). Included only by paged_attention.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include "backend/cuda/kernels/pdl.cuh"

namespace locus::cuda::attention {

// partial_out f32 [rows, splits, v_head_dim] holds each split's unnormalized sum of p * v;
// partial_stats [rows, splits, 2] its (max in log2 units, sum of p). Splits that saw no visible
// key carry sum 0 and are skipped (their weight would be exp2(-inf)); out = sum_s w_s o_s /
// sum_s w_s l_s with w_s = exp2(max_s - max).
__global__ void merge_splits_kernel(const float* partial_out, const float* partial_stats,
                                    int num_splits, int v_head_dim, __nv_bfloat16* out) {
  pdl_launch_dependents();
  const int64_t row = blockIdx.x;
  const float2* stats = reinterpret_cast<const float2*>(partial_stats) + row * num_splits;
  const float* partial = partial_out + row * num_splits * v_head_dim;
  float m = -INFINITY;
  for (int s = 0; s < num_splits; ++s) {
    const float2 st = stats[s];
    if (st.y > 0.0f) m = fmaxf(m, st.x);
  }
  float denom = 0.0f;
  for (int s = 0; s < num_splits; ++s) {
    const float2 st = stats[s];
    if (st.y > 0.0f) denom += exp2f(st.x - m) * st.y;
  }
  const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
  __nv_bfloat16* dst = out + row * v_head_dim;
  for (int c = threadIdx.x; c < v_head_dim / 4; c += blockDim.x) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s = 0; s < num_splits; ++s) {
      const float2 st = stats[s];
      if (st.y > 0.0f) {
        const float w = exp2f(st.x - m);
        const float4 v = reinterpret_cast<const float4*>(partial + s * v_head_dim)[c];
        acc.x += w * v.x;
        acc.y += w * v.y;
        acc.z += w * v.z;
        acc.w += w * v.w;
      }
    }
    const __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
    uint2 packed;
    packed.x = *reinterpret_cast<const uint32_t*>(&lo);
    packed.y = *reinterpret_cast<const uint32_t*>(&hi);
    reinterpret_cast<uint2*>(dst)[c] = packed;
  }
}

}  // namespace locus::cuda::attention
