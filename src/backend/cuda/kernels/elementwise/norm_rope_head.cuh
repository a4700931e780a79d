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

// The same step with its constants in registers, loaded before pdl_wait: the norm weight, and
// each rotated pair's cos / sin (the position is written by the host before the step, the
// frequencies are constants). After the wait only the head's own load, the sum of squares and
// the stores remain; with the constants loaded there, the weight and the frequencies were two
// more dependent round trips and the sincosf on the step's critical path. Same arithmetic in
// the same order as norm_rope_head, so the same bits. Heads up to kNormRopePreDim elements.
inline constexpr int kNormRopePreDim = 128;
struct NormRopeConsts {
  float w[kNormRopePreDim / 32];
  float cos[kNormRopePreDim / 64];
  float sin[kNormRopePreDim / 64];
};

__device__ __forceinline__ NormRopeConsts norm_rope_consts(const float* weight, int d, float pos,
                                                           const float* inv_freq, int rotary_dim,
                                                           float attention_factor, int lane) {
  NormRopeConsts k;
#pragma unroll
  for (int j = 0; j < kNormRopePreDim / 32; ++j) {
    const int c = lane + 32 * j;
    k.w[j] = weight != nullptr && c < d ? weight[c] : 0.0f;
  }
  const int half = rotary_dim / 2;
#pragma unroll
  for (int j = 0; j < kNormRopePreDim / 64; ++j) {
    const int i = lane + 32 * j;
    float s = 0.0f, c = 0.0f;
    if (i < half) sincosf(pos * inv_freq[i], &s, &c);
    k.cos[j] = c * attention_factor;
    k.sin[j] = s * attention_factor;
  }
  return k;
}

// norm_rope_head with norm_rope_consts' constants (d, rotary_dim <= kNormRopePreDim).
__device__ __forceinline__ void norm_rope_head(const __nv_bfloat16* src, bool has_weight,
                                               const NormRopeConsts& k, float eps, int d,
                                               int rotary_dim, bool neox, float* buf,
                                               __nv_bfloat16* dst, int lane) {
  __syncwarp();
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kNormRopePreDim / 32; ++j) {
    const int c = lane + 32 * j;
    if (c < d) {
      const float v = __bfloat162float(src[c]);
      buf[c] = v;
      ss += v * v;
    }
  }
  if (has_weight) {
    const float inv = rsqrtf(norm_rope_warp_sum(ss) / static_cast<float>(d) + eps);
#pragma unroll
    for (int j = 0; j < kNormRopePreDim / 32; ++j) {
      const int c = lane + 32 * j;
      if (c < d) buf[c] = __bfloat162float(__float2bfloat16_rn(buf[c] * inv * k.w[j]));
    }
  }
  __syncwarp();

  const int half = rotary_dim / 2;
#pragma unroll
  for (int j = 0; j < kNormRopePreDim / 64; ++j) {
    const int i = lane + 32 * j;
    if (i >= half) continue;
    const int lo = neox ? i : 2 * i;
    const int hi = neox ? i + half : 2 * i + 1;
    const float x0 = buf[lo], x1 = buf[hi];
    dst[lo] = __float2bfloat16_rn(x0 * k.cos[j] - x1 * k.sin[j]);
    dst[hi] = __float2bfloat16_rn(x1 * k.cos[j] + x0 * k.sin[j]);
  }
  for (int c = rotary_dim + lane; c < d; c += 32)
    dst[c] = __float2bfloat16_rn(buf[c]);
}

}  // namespace locus::cuda
