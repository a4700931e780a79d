// Combining the split-KV partials of paged attention into the bf16 output: the arithmetic that
// the last split CTA of the attention kernel and merge_splits_kernel (paged_attention.cu, when
// no counters are given) share. Included only by the attention kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace locus::cuda::attention {

// Partials, per (row, split): the split's output already normalized by its own softmax sum, in
// bf16 (partial_out [rows, splits, v_head_dim]), and its log-sum-exp in log2 units (partial_lse
// [rows, splits]; -inf and an all-zero output for a split that saw no visible key). Then
// out = sum_s w_s o_s / sum_s w_s with w_s = exp2(lse_s - max lse). Half the bytes of f32
// unnormalized partials, so that one round of loads covers all splits of a decode row: the
// merge sits on the critical path of every decode step, where each dependent L2 round trip
// measured 0.6-1 us (docs/benchmarks.md, "The split merge of decode attention").

// Merges output columns [c, c + 8) of one row from splits [0, live); `partial` points at the
// row's split 0, column c, `lse` at the row's split 0. kBatch splits' loads are in flight
// together (5 registers each); later batches fold in with an online rescale, so any count works.
template <int kBatch>
__device__ __forceinline__ uint4 merge_split_columns(const __nv_bfloat16* partial,
                                                     int64_t split_stride, const float* lse,
                                                     int live) {
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  float m = -INFINITY, denom = 0.0f;
  for (int s0 = 0; s0 < live; s0 += kBatch) {
    uint4 v[kBatch];
    float l[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const bool in = s0 + u < live;
      l[u] = in ? __ldcg(lse + s0 + u) : -INFINITY;
      v[u] = in ? __ldcg(reinterpret_cast<const uint4*>(partial + (s0 + u) * split_stride))
                : make_uint4(0, 0, 0, 0);
    }
    float m_new = m;
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
      m_new = fmaxf(m_new, l[u]);
    if (m_new == -INFINITY) continue;        // no visible key yet
    const float rescale = exp2f(m - m_new);  // 0 while m is -inf
    denom *= rescale;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      acc[j] *= rescale;
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const float w = exp2f(l[u] - m_new);  // 0 for an empty split (and past `live`)
      denom += w;
      const uint32_t words[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&words[j]));
        acc[2 * j] += w * f.x;
        acc[2 * j + 1] += w * f.y;
      }
    }
    m = m_new;
  }
  const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
  uint32_t out[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(acc[2 * j] * inv, acc[2 * j + 1] * inv);
    out[j] = *reinterpret_cast<const uint32_t*>(&b);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

}  // namespace locus::cuda::attention
