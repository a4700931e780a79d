// One attention head's q/k-norm and rope, done by one warp: the arithmetic of the fused GQA step
// (qkv_rope.cu), in its own header so that any kernel folding that step in (two were tried and
// measured slower, docs/benchmarks.md) gives bit-identical q and k.
#pragma once

#include <cuda_bf16.h>

namespace locus::cuda {

__device__ __forceinline__ float norm_rope_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// dst[0, d) = rope(rms_norm(src) * weight) in bf16 (no norm when weight is null), rounding where
// the unfused ops round: the normalized head to bf16, then each rotated pair. buf: d floats of
// this warp's own shared memory. Ends with the warp's writes to dst issued (no barrier).
__device__ __forceinline__ void norm_rope_head(const __nv_bfloat16* src, const float* weight,
                                               float eps, int d, float pos, const float* inv_freq,
                                               int rotary_dim, float attention_factor, bool neox,
                                               float* buf, __nv_bfloat16* dst, int lane) {
  __syncwarp();  // buf may still be read by this warp's previous call
  float ss = 0.0f;
  for (int c = lane; c < d; c += 32) {
    const float v = __bfloat162float(src[c]);
    buf[c] = v;
    ss += v * v;
  }
  if (weight != nullptr) {
    const float inv = rsqrtf(norm_rope_warp_sum(ss) / static_cast<float>(d) + eps);
    for (int c = lane; c < d; c += 32)  // bf16, as rms_norm's output
      buf[c] = __bfloat162float(__float2bfloat16_rn(buf[c] * inv * weight[c]));
  }
  __syncwarp();

  const int half = rotary_dim / 2;
  for (int i = lane; i < half; i += 32) {
    // f32 product and accurate sincosf, as the rope kernel (transformers' f32 matmul).
    const float freq = pos * inv_freq[i];
    float s, c;
    sincosf(freq, &s, &c);
    c *= attention_factor;
    s *= attention_factor;
    const int lo = neox ? i : 2 * i;
    const int hi = neox ? i + half : 2 * i + 1;
    const float x0 = buf[lo], x1 = buf[hi];
    dst[lo] = __float2bfloat16_rn(x0 * c - x1 * s);
    dst[hi] = __float2bfloat16_rn(x1 * c + x0 * s);
  }
  for (int c = rotary_dim + lane; c < d; c += 32)
    dst[c] = __float2bfloat16_rn(buf[c]);
}

}  // namespace locus::cuda
