// The key loop of the prefill tiles with one warp across a row (head dims up to 128), used by
// paged_attention_tile_kernel (paged_attention.cuh). Device code only.
#pragma once

#include "backend/cuda/kernels/attention/tile_ops.cuh"

namespace locus::cuda::attention {

// The key loop of the one-warp-per-row prefill layout (kWarpCols 1): row maxima and sums by
// quad shuffles, and P passed from the S accumulators to the P V mma in registers (the m16n8 C
// layout of two adjacent key octets is the m16k16 A layout), so a tile needs two barriers
// instead of three and no P round trip through shared memory. With kPrefillKStages 2 the next
// tile's K is copied while this tile computes (V, single-buffered, while Q K^T runs). Same
// arithmetic, in the same order, as the general loop in paged_attention_tile_kernel; o, m_run
// and l_run carry the online softmax.
template <int kHeadDimCap, int kVHeadDimCap, bool kExact, int kWarpRows>
__device__ __forceinline__ void pipelined_tiles(
    const TileParams& p, const bf16* k_cache, const bf16* v_cache, const int32_t* block_table,
    int64_t k_head_offset, int64_t v_head_offset, int head_dim, int v_head_dim, int d_pad,
    int k_stride, int v_stride, const bf16* s_q, bf16* s_k, bf16* s_v, int k_stage, int v_stage,
    int kv_first, int kv_last, int tile_begin, int tile_end, int early_rows,
    const int (&row_pos)[2], const int (&row_first)[2], float (&o)[kVHeadDimCap / 8][4],
    float (&m_run)[2], float (&l_run)[2]) {
  constexpr int kThreads = kWarpRows * 32;
  constexpr int kSTiles = kKvTile / 8;
  constexpr int kOTiles = kVHeadDimCap / 8;
  constexpr bool kDoubleK = kPrefillKStages == 2;
  const int lane = threadIdx.x & 31;
  const int warp_row = threadIdx.x >> 5;
  auto issue_k = [&](int kt, int stage, int r0) {
    load_kv_rows<kThreads, kExact, kHeadDimCap>(k_cache, p.k_block_stride, p.k_token_stride,
                                                k_head_offset, block_table, p.block_size,
                                                p.block_shift, head_dim, kv_first + kt * kKvTile,
                                                kv_last, s_k + stage * k_stage, k_stride, r0);
    cp_async_commit();
  };
  auto issue_v = [&](int kt, int r0) {
    if (!p.v_in_k) {
      load_kv_rows<kThreads, kExact, kVHeadDimCap>(
          v_cache, p.v_block_stride, p.v_token_stride, v_head_offset, block_table, p.block_size,
          p.block_shift, v_head_dim, kv_first + kt * kKvTile, kv_last, s_v, v_stride, r0);
    }
    cp_async_commit();  // an empty group when V is in K
  };
  // Copy groups complete in order. Per tile: [K (double-buffered: issued a tile ahead)], V,
  // [the next tile's K]; the waits below count what may still be pending.
  if (kDoubleK && tile_begin < tile_end) issue_k(tile_begin, 0, early_rows);
  for (int kt = tile_begin; kt < tile_end; ++kt) {
    const int stage = kDoubleK ? (kt - tile_begin) & 1 : 0;
    const bool next = kDoubleK && kt + 1 < tile_end;
    const int r0 = kt == tile_begin ? early_rows : 0;  // rows already in flight
    if (!kDoubleK) issue_k(kt, 0, r0);
    issue_v(kt, r0);
    if (next) issue_k(kt + 1, stage ^ 1, 0);
    if (next) {
      cp_async_wait<2>();  // pending: this tile's V, the next tile's K
    } else {
      cp_async_wait<1>();  // pending: this tile's V
    }
    __syncthreads();
    const int j0 = kv_first + kt * kKvTile;
    const bf16* sk = s_k + stage * k_stage;
    const bf16* sv = p.v_in_k ? sk : s_v;

    // ---- S = Q K^T for this warp's 16 rows x kKvTile keys ----
    float s[kSTiles][4];
    qk_scores<kSTiles, kExact ? kHeadDimCap / 16 : 2>(s, s_q, warp_row * 16, sk, 0, k_stride, d_pad,
                                                      lane);

    // ---- online softmax within the warp ----
    // Tiles that every row of the warp sees whole (all but the diagonal and window edges) skip
    // the per-key mask.
    const bool whole = __all_sync(0xffffffffu, j0 >= row_first[0] && j0 >= row_first[1] &&
                                                   j0 + kKvTile - 1 <= row_pos[0] &&
                                                   j0 + kKvTile - 1 <= row_pos[1]);
    float tile_max[2] = {-INFINITY, -INFINITY};
    if (whole) {
#pragma unroll
      for (int j = 0; j < kSTiles; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[j][e] *= p.scale_log2;
          tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[j][e]);
        }
      }
    } else {
      mask_scores(s, j0, lane, row_first, row_pos, p.scale_log2, tile_max);
    }
    float alpha[2], m_use[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      const float m_new = fmaxf(m_run[h], tile_max[h]);
      m_use[h] = m_new == -INFINITY ? 0.0f : m_new;  // as in the general loop
      alpha[h] = exp2f(m_run[h] - m_use[h]);
      m_run[h] = m_new;
    }
    float tile_sum[2] = {0.0f, 0.0f};
    uint32_t pa[kKvTile / 16][4];  // P as the A operand of the P V mma, bf16
#pragma unroll
    for (int j = 0; j < kSTiles; ++j) {
      const float p0 = exp2f(s[j][0] - m_use[0]);
      const float p1 = exp2f(s[j][1] - m_use[0]);
      const float p2 = exp2f(s[j][2] - m_use[1]);
      const float p3 = exp2f(s[j][3] - m_use[1]);
      tile_sum[0] += p0 + p1;
      tile_sum[1] += p2 + p3;
      pa[j / 2][(j & 1) * 2] = pack_bf16x2(p0, p1);
      pa[j / 2][(j & 1) * 2 + 1] = pack_bf16x2(p2, p3);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_sum[h] += __shfl_xor_sync(0xffffffffu, tile_sum[h], 1);
      tile_sum[h] += __shfl_xor_sync(0xffffffffu, tile_sum[h], 2);
      l_run[h] = l_run[h] * alpha[h] + (0.0f + tile_sum[h]);
    }
    rescale_rows(o, alpha);
    if (next) {
      cp_async_wait<1>();  // this tile's V; the next tile's K may still be in flight
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    // ---- O += P V for this warp's 16 rows x all output columns ----
    const bf16* v_frag = sv + ((lane & 7) + ((lane >> 3) & 1) * 8) * v_stride + (lane >> 4) * 8;
#pragma unroll
    for (int ks = 0; ks < kKvTile / 16; ++ks) {
#pragma unroll
      for (int np = 0; np < kOTiles / 2; ++np) {
        if (kExact || np * 16 < v_head_dim) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, v_frag + ks * 16 * v_stride + np * 16);
          mma_bf16(o[2 * np], pa[ks], b[0], b[1]);
          mma_bf16(o[2 * np + 1], pa[ks], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the next copies overwrite V and this K stage
  }
}

}  // namespace locus::cuda::attention
