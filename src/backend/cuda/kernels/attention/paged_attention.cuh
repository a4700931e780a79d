// Paged attention kernel template (bf16 in/out, f32 softmax), one body for decode and prefill.
// Never includes host libraries; launched only through paged_attention.cu.
//
// Design
//  - Rows, not tokens: a sequence's q_len new tokens and the `group` q heads that share one kv
//    head are flattened into q_len * group rows (row = token * group + head). A CTA takes a tile
//    of 16 * kWarpRows consecutive rows of one sequence and one kv head, so each K/V tile is read
//    once for the whole GQA group and all the tile's tokens (decode: 1 token x group heads;
//    prefill: 64 rows = 64 / group tokens). Grid: (row tiles of all sequences, kv heads, splits).
//    A CTA finds its (sequence, tile) by a block-wide scan over query_start_loc (decode with one
//    tile per sequence: CTA x takes sequence x).
//  - Launched with PDL: before pdl_wait a CTA reads only what the host wrote before the step
//    (query_start_loc, seq_lens, block table) and KV of keys older than the step, so its first
//    tile's loads overlap the kernels that produce q and the new keys.
//  - Decode/short queries: kWarpRows 1, kWarpCols 4 (16 rows, 4 warps split the keys of S and
//    the columns of O). Prefill: kWarpRows 4 (64 rows), kWarpCols = v_head_dim_cap / 128.
//  - KV tiles of 64 keys over the CTA's key range [first key of its first row, position of its
//    last row]: keys above the causal diagonal or below the sliding window are never loaded,
//    except inside a partially masked tile. Each token's address comes from the block table
//    (16-byte cp.async per lane, zero-filled past the range; padding entries are never read).
//  - Tensor cores: mma.sync m16n8k16 bf16 -> f32 for S = Q K^T and O += P V, operands by
//    ldmatrix from shared memory (Q once, K and V per tile, P written back as bf16).
//  - Prefill with one warp across a row (head dims up to 128; prefill_pipeline.cuh): P stays in
//    registers, the row statistics need no cross-warp exchange, the next tile's K is copied
//    while this tile computes, whole tiles skip the per-key mask, and the KV loads use shifts
//    and unrolled whole-tile copies. 8192-token prefill of the qwen3-30b-a3b shape: 377 ->
//    301 ms on the H200.
//  - Online softmax in the log2 domain (scores prescaled by scale * log2 e, exp2f); per-warp row
//    maxima and sums combined across the kWarpCols warps through shared memory.
//  - Split-KV (flash-decoding): grid.z splits the key range into runs of whole tiles. With one
//    split the CTA writes the bf16 output; otherwise each split's normalized bf16 output and
//    its log-sum-exp go to the workspace, every (row, split) written even when the split is
//    empty (lse -inf, zeros); the last split CTA of each (row tile, kv head) to finish merges
//    them (split_counters), or merge_splits_kernel does when no counters are given.
//  - Head dims: kHeadDimCap / kVHeadDimCap bound the register arrays; kExact = dims equal the
//    caps (compile-time loop bounds), otherwise run-time dims (multiples of 8) are padded to 16
//    in shared memory with zero K/Q columns.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels/attention/merge_splits.cuh"
#include "backend/cuda/kernels/attention/paged_attention_tiles.h"
#include "backend/cuda/kernels/attention/prefill_pipeline.cuh"
#include "backend/cuda/kernels/attention/split_tiles.h"
#include "backend/cuda/kernels/attention/tile_ops.cuh"
#include "backend/cuda/kernels/last_block.cuh"
#include "backend/cuda/kernels/pdl.cuh"

namespace locus::cuda::attention {

template <int kHeadDimCap, int kVHeadDimCap, bool kExact, int kWarpRows, int kWarpCols>
__global__ void __launch_bounds__(kWarpRows* kWarpCols * 32)
    paged_attention_tile_kernel(const TileParams p) {
  constexpr int kThreads = kWarpRows * kWarpCols * 32;
  constexpr int kWarps = kWarpRows * kWarpCols;
  constexpr int kRows = kWarpRows * kRowsPerWarp;
  constexpr int kSCols = kKvTile / kWarpCols;       // score columns per warp
  constexpr int kSTiles = kSCols / 8;               // m16n8 tiles of S per warp
  constexpr int kOCols = kVHeadDimCap / kWarpCols;  // output columns per warp
  constexpr int kOTiles = kOCols / 8;
  constexpr int kPStride = kKvTile + 8;
  static_assert(kSCols % 16 == 0 && kOCols % 16 == 0, "ldmatrix.x4 covers 16 columns");
  static_assert(kHeadDimCap % 16 == 0 && kVHeadDimCap % 16 == 0, "caps are multiples of 16");
  // Prefill tiles with one warp across a row (head dims up to 128): each warp owns its rows'
  // softmax, so P stays in registers and no cross-warp reduction or barrier is needed for it,
  // and K/V tiles are double-buffered (tile kt + 1 loads while tile kt computes).
  constexpr bool kPipe = kWarpCols == 1 && kWarpRows > 1;
  constexpr int kStages = kPipe ? kPrefillKStages : 1;

  pdl_launch_dependents();  // the o projection after us prefetches its weights meanwhile
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warp_row = warp / kWarpCols;
  const int warp_col = warp % kWarpCols;

  // ---- which (sequence, row tile) this CTA owns: scan of per-sequence tile counts ----
  __shared__ int found_seq, found_tile;
  __shared__ int warp_sums[kWarps];
  int seq = static_cast<int>(blockIdx.x), tile = 0;
  if (p.tile_per_seq) {
    // Decode: sequence blockIdx.x, its only tile (none when it has no query rows).
    if (p.query_start_loc[seq + 1] == p.query_start_loc[seq]) {  // uniform across the CTA
      pdl_wait();
      return;
    }
  } else {
    if (tid == 0) found_seq = -1;
    __syncthreads();
    const int x = static_cast<int>(blockIdx.x);
    int carry = 0;
    for (int base = 0; base < p.num_seqs; base += kThreads) {
      const int s = base + tid;
      int count = 0;
      if (s < p.num_seqs) {
        const int rows = (p.query_start_loc[s + 1] - p.query_start_loc[s]) * p.group;
        count = (rows + kRows - 1) / kRows;
      }
      int incl = count;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += n;
      }
      if (lane == 31) warp_sums[warp] = incl;
      __syncthreads();
      int total = 0;
      for (int w = 0; w < kWarps; ++w) {
        const int v = warp_sums[w];
        if (w < warp) incl += v;
        total += v;
      }
      incl += carry;
      if (count > 0 && x >= incl - count && x < incl) {
        found_seq = s;
        found_tile = x - (incl - count);
      }
      carry += total;
      __syncthreads();  // found_* visible; warp_sums free for the next round
      if (found_seq >= 0 || carry > x) break;
    }
    if (found_seq < 0) {  // grid slack past the last tile (uniform across the CTA)
      pdl_wait();
      return;
    }
    seq = found_seq;
    tile = found_tile;
  }

  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* k_cache = static_cast<const bf16*>(p.k_cache);
  const bf16* v_cache = p.v_in_k ? k_cache : static_cast<const bf16*>(p.v_cache);
  const int head_dim = kExact ? kHeadDimCap : p.head_dim;
  const int v_head_dim = kExact ? kVHeadDimCap : p.v_head_dim;
  const int d_pad = kExact ? kHeadDimCap : round_up_16(head_dim);
  const int k_stride = d_pad + 8;  // shared-memory row strides, elements
  const int v_stride = p.v_in_k ? k_stride : (kExact ? kVHeadDimCap : round_up_16(v_head_dim)) + 8;

  extern __shared__ __align__(16) unsigned char smem[];
  // Q tile, kStages K (and V) tiles, then (kPipe: absent) the P tile and the row reductions.
  const int k_stage = kKvTile * k_stride;
  const int v_stage = p.v_in_k ? k_stage : kKvTile * v_stride;
  bf16* s_q = reinterpret_cast<bf16*>(smem);
  bf16* s_k = s_q + kRows * k_stride;
  bf16* s_v = p.v_in_k ? s_k : s_k + kStages * k_stage;  // one V tile
  bf16* s_p = p.v_in_k ? s_k + kStages * k_stage : s_v + v_stage;
  float* red_max = reinterpret_cast<float*>(s_p + kRows * kPStride);
  float* red_sum = red_max + kWarpCols * kRows;

  const int q_begin = p.query_start_loc[seq];
  const int q_len = p.query_start_loc[seq + 1] - q_begin;
  const int seq_len = p.seq_lens[seq];
  const int group = p.group;
  const int kv_head = blockIdx.y;
  const int row_lo = tile * kRows;
  const int row_hi = min(row_lo + kRows, q_len * group);  // exclusive
  const int history = seq_len - q_len;                    // position of new token 0
  // Key range of the whole tile: the first row's window start to the last row's position.
  const int kv_last = history + (row_hi - 1) / group;
  const int first_pos = history + row_lo / group;
  const int kv_first = p.sliding_window > 0 ? max(0, first_pos - p.sliding_window + 1) : 0;
  const int num_kv_tiles = (kv_last - kv_first + kKvTile) / kKvTile;
  const TileRange split = split_tiles(num_kv_tiles, p.num_splits, static_cast<int>(blockIdx.z));
  const int tile_begin = split.begin;
  const int tile_end = split.end;

  const int32_t* block_table = p.block_table + seq * p.block_table_stride;
  const int64_t k_head_offset = static_cast<int64_t>(kv_head) * p.k_head_stride;
  const int64_t v_head_offset = static_cast<int64_t>(kv_head) * p.v_head_stride;

  // ---- before pdl_wait: the first KV tile's keys that predate this step ----
  // Keys below `history` were written by earlier steps and the sequence metadata by the host
  // before the step began, so with PDL their loads overlap the kernels still producing q and
  // the new keys. At decode that is every key but the newest: it alone is loaded after the wait.
  const int first_j0 = kv_first + tile_begin * kKvTile;
  const int early_rows =
      p.preload_old_kv && tile_begin < tile_end ? max(0, min(kKvTile, history - first_j0)) : 0;
  if (early_rows > 0) {
    load_kv_tile<kThreads>(k_cache, p.k_block_stride, p.k_token_stride, k_head_offset, block_table,
                           p.block_size, head_dim, first_j0, kv_last, s_k, k_stride, 0, early_rows);
    if (!p.v_in_k) {
      load_kv_tile<kThreads>(v_cache, p.v_block_stride, p.v_token_stride, v_head_offset,
                             block_table, p.block_size, v_head_dim, first_j0, kv_last, s_v,
                             v_stride, 0, early_rows);
    }
    cp_async_commit();
  }
  // Decode, where this split's only tile is the sequence's last: its rows past the new key are
  // zeroed and the new key's cache rows found before pdl_wait, so that after it the new key's
  // K and V rows are the only loads, issued at once. In load_kv_tile they waited on their
  // block-table entry and came after the copies that zero-fill up to 63 rows; in-kernel
  // timestamps had this CTA issue them 1.6 us after the other CTAs were done issuing, and the
  // split merge waits for the last CTA (docs/benchmarks.md).
  const bool new_key_tile = !kPipe && p.preload_old_kv && q_len == 1 &&
                            tile_begin + 1 == tile_end && tile_end == num_kv_tiles;
  const int new_row = kv_last - first_j0;  // == early_rows when new_key_tile
  const bf16* new_k = nullptr;
  const bf16* new_v = nullptr;
  if (new_key_tile) {
    new_k = kv_row<false>(k_cache + k_head_offset, p.k_block_stride, p.k_token_stride, block_table,
                          p.block_size, 0, kv_last);
    const int k_chunks = head_dim / 8;
    for (int idx = tid; idx < (kKvTile - 1 - new_row) * k_chunks; idx += kThreads) {
      const int r = new_row + 1 + idx / k_chunks;
      *reinterpret_cast<uint4*>(s_k + r * k_stride + (idx % k_chunks) * 8) = make_uint4(0, 0, 0, 0);
    }
    if (!p.v_in_k) {
      new_v = kv_row<false>(v_cache + v_head_offset, p.v_block_stride, p.v_token_stride,
                            block_table, p.block_size, 0, kv_last);
      const int v_chunks = v_head_dim / 8;
      for (int idx = tid; idx < (kKvTile - 1 - new_row) * v_chunks; idx += kThreads) {
        const int r = new_row + 1 + idx / v_chunks;
        *reinterpret_cast<uint4*>(s_v + r * v_stride + (idx % v_chunks) * 8) =
            make_uint4(0, 0, 0, 0);
      }
    }
  }
  pdl_wait();          // q, the new keys, the outputs and the split workspace belong to this step
  if (new_key_tile) {  // its round trip overlaps q's below
    const int k_chunks = head_dim / 8;
    const int v_chunks = p.v_in_k ? 0 : v_head_dim / 8;
    for (int idx = tid; idx < k_chunks + v_chunks; idx += kThreads) {
      const bool is_v = idx >= k_chunks;
      const int c = (is_v ? idx - k_chunks : idx) * 8;
      cp_async_16((is_v ? s_v + new_row * v_stride : s_k + new_row * k_stride) + c,
                  (is_v ? new_v : new_k) + c, 16);
    }
    cp_async_commit();
  }

  // ---- Q tile -> shared (zeros for rows past the sequence and for the pad columns) ----
  const int chunks = d_pad / 8;
  for (int idx = tid; idx < kRows * chunks; idx += kThreads) {
    const int r = idx / chunks;
    const int c = idx - r * chunks;
    const int row = row_lo + r;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (row < row_hi && c * 8 < head_dim) {
      const int64_t token = q_begin + row / group;
      const int64_t head = static_cast<int64_t>(kv_head) * group + row % group;
      val = *reinterpret_cast<const uint4*>(q + token * p.q_token_stride + head * p.q_head_stride +
                                            c * 8);
    }
    *reinterpret_cast<uint4*>(s_q + r * k_stride + c * 8) = val;
  }
  // K pad columns (head_dim % 16 == 8) stay zero: tile loads never write them.
  if (head_dim < d_pad) {
    for (int r = tid; r < kKvTile; r += kThreads)
      *reinterpret_cast<uint4*>(s_k + r * k_stride + head_dim) = make_uint4(0, 0, 0, 0);
  }

  // The two rows this thread holds in the mma C layout, and their visible key ranges.
  int row_pos[2], row_first[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_lo + warp_row * 16 + (lane >> 2) + 8 * h;
    if (row < row_hi) {
      row_pos[h] = history + row / group;
      row_first[h] = p.sliding_window > 0 ? max(0, row_pos[h] - p.sliding_window + 1) : 0;
    } else {
      row_pos[h] = -1;  // masks every key
      row_first[h] = 0;
    }
  }

  float o[kOTiles][4];
#pragma unroll
  for (int j = 0; j < kOTiles; ++j)
    o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.0f, 0.0f};

  const int s_col0 = warp_col * kSCols;
  const int o_col0 = warp_col * kOCols;
  __syncthreads();

  if constexpr (kPipe) {
    pipelined_tiles<kHeadDimCap, kVHeadDimCap, kExact, kWarpRows>(
        p, k_cache, v_cache, block_table, k_head_offset, v_head_offset, head_dim, v_head_dim, d_pad,
        k_stride, v_stride, s_q, s_k, s_v, k_stage, v_stage, kv_first, kv_last, tile_begin,
        tile_end, early_rows, row_pos, row_first, o, m_run, l_run);
  } else {
    for (int kt = tile_begin; kt < tile_end; ++kt) {
      const int j0 = kv_first + kt * kKvTile;
      const int r0 = kt == tile_begin ? early_rows : 0;      // rows already in flight
      const bool issued = new_key_tile && kt == tile_begin;  // every row in flight or zeroed
      if (!issued) {
        load_kv_tile<kThreads>(k_cache, p.k_block_stride, p.k_token_stride, k_head_offset,
                               block_table, p.block_size, head_dim, j0, kv_last, s_k, k_stride, r0);
      }
      cp_async_commit();
      if (!p.v_in_k && !issued) {
        load_kv_tile<kThreads>(v_cache, p.v_block_stride, p.v_token_stride, v_head_offset,
                               block_table, p.block_size, v_head_dim, j0, kv_last, s_v, v_stride,
                               r0);
      }
      cp_async_commit();   // V's group (empty when V is in K) overlaps the QK^T below
      cp_async_wait<1>();  // K (and the early rows of K and V)
      __syncthreads();

      // ---- S = Q K^T for this warp's 16 rows x kSCols keys ----
      float s[kSTiles][4];
      qk_scores<kSTiles, kExact ? kHeadDimCap / 16 : 2>(s, s_q, warp_row * 16, s_k, s_col0,
                                                        k_stride, d_pad, lane);

      // ---- online softmax: mask, row max across the kWarpCols warps, probabilities ----
      float tile_max[2] = {-INFINITY, -INFINITY};
      mask_scores(s, j0 + s_col0, lane, row_first, row_pos, p.scale_log2, tile_max);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      }
      const int local_row = warp_row * 16 + (lane >> 2);
      if ((lane & 3) == 0) {
        red_max[warp_col * kRows + local_row] = tile_max[0];
        red_max[warp_col * kRows + local_row + 8] = tile_max[1];
      }
      __syncthreads();
      float alpha[2], m_use[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float m_new = m_run[h];
#pragma unroll
        for (int w = 0; w < kWarpCols; ++w)
          m_new = fmaxf(m_new, red_max[w * kRows + local_row + 8 * h]);
        // A row with no visible key yet keeps max -inf; subtracting 0 instead of -inf keeps
        // exp2f(-inf - m) at 0 rather than NaN.
        m_use[h] = m_new == -INFINITY ? 0.0f : m_new;
        alpha[h] = exp2f(m_run[h] - m_use[h]);
        m_run[h] = m_new;
      }
      float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int j = 0; j < kSTiles; ++j) {
        const float p0 = exp2f(s[j][0] - m_use[0]);
        const float p1 = exp2f(s[j][1] - m_use[0]);
        const float p2 = exp2f(s[j][2] - m_use[1]);
        const float p3 = exp2f(s[j][3] - m_use[1]);
        tile_sum[0] += p0 + p1;
        tile_sum[1] += p2 + p3;
        const int col = s_col0 + j * 8 + (lane & 3) * 2;
        *reinterpret_cast<uint32_t*>(s_p + local_row * kPStride + col) = pack_bf16x2(p0, p1);
        *reinterpret_cast<uint32_t*>(s_p + (local_row + 8) * kPStride + col) = pack_bf16x2(p2, p3);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_sum[h] += __shfl_xor_sync(0xffffffffu, tile_sum[h], 1);
        tile_sum[h] += __shfl_xor_sync(0xffffffffu, tile_sum[h], 2);
      }
      if ((lane & 3) == 0) {
        red_sum[warp_col * kRows + local_row] = tile_sum[0];
        red_sum[warp_col * kRows + local_row + 8] = tile_sum[1];
      }
      rescale_rows(o, alpha);
      cp_async_wait<0>();
      __syncthreads();  // P, row sums and V visible to every warp
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarpCols; ++w)
          sum += red_sum[w * kRows + local_row + 8 * h];
        l_run[h] = l_run[h] * alpha[h] + sum;
      }

      // ---- O += P V for this warp's 16 rows x kOCols output columns ----
      const bf16* p_frag = s_p + (warp_row * 16 + (lane & 15)) * kPStride + (lane >> 4) * 8;
      const bf16* v_frag =
          s_v + ((lane & 7) + ((lane >> 3) & 1) * 8) * v_stride + o_col0 + (lane >> 4) * 8;
#pragma unroll
      for (int ks = 0; ks < kKvTile / 16; ++ks) {
        uint32_t a[4];
        ldmatrix_x4(a, p_frag + ks * 16);
#pragma unroll
        for (int np = 0; np < kOTiles / 2; ++np) {
          if (kExact || o_col0 + np * 16 < v_head_dim) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, v_frag + ks * 16 * v_stride + np * 16);
            mma_bf16(o[2 * np], a, b[0], b[1]);
            mma_bf16(o[2 * np + 1], a, b[2], b[3]);
          }
        }
      }
      __syncthreads();  // the next tile overwrites K, V and P
    }
  }  // kPipe

  // ---- epilogue: normalized bf16 output, or the split's partial and its (max, sum) ----
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_lo + warp_row * 16 + (lane >> 2) + 8 * h;
    if (row >= row_hi) continue;
    const int64_t token = q_begin + row / group;
    const int64_t head = static_cast<int64_t>(kv_head) * group + row % group;
    const int64_t out_row = token * p.num_q_heads + head;
    if (p.num_splits == 1) {
      const float inv = l_run[h] > 0.0f ? 1.0f / l_run[h] : 0.0f;
      bf16* dst = static_cast<bf16*>(p.out) + out_row * v_head_dim;
#pragma unroll
      for (int j = 0; j < kOTiles; ++j) {
        const int col = o_col0 + j * 8 + (lane & 3) * 2;
        if (kExact || col < v_head_dim) {
          *reinterpret_cast<uint32_t*>(dst + col) =
              pack_bf16x2(o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
        }
      }
    } else {
      const int64_t split_row = out_row * p.num_splits + blockIdx.z;
      const float inv = l_run[h] > 0.0f ? 1.0f / l_run[h] : 0.0f;  // an empty split writes 0s
      bf16* dst = static_cast<bf16*>(p.partial_out) + split_row * v_head_dim;
#pragma unroll
      for (int j = 0; j < kOTiles; ++j) {
        const int col = o_col0 + j * 8 + (lane & 3) * 2;
        if (kExact || col < v_head_dim) {
          *reinterpret_cast<uint32_t*>(dst + col) =
              pack_bf16x2(o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
        }
      }
      if (warp_col == 0 && (lane & 3) == 0)
        p.partial_lse[split_row] = l_run[h] > 0.0f ? m_run[h] + log2f(l_run[h]) : -INFINITY;
    }
  }
  if (p.num_splits == 1 || p.split_counters == nullptr) return;

  // ---- the last split of this (row tile, kv head) to finish merges all splits' partials ----
  // (last_block.cuh; the counter goes back to 0 for the next launch, which CUDA graph replays
  // rely on.)
  if (!last_to_arrive(p.split_counters + blockIdx.x * gridDim.y + blockIdx.y, p.num_splits,
                      [] { __syncthreads(); }))
    return;
  // One (row, 8 columns) output per thread and pass: all of its splits' loads go out together
  // (merge_split_columns). Splits past the key tiles are empty (split_tiles) and not read.
  // Decode: 12 splits' loads per batch keep the kernel at 96 registers (24 need 168, which fits
  // 3 CTAs per SM instead of 5: batch 256 35.9 vs 34.4 ms, batch 8 10.89 vs 10.79 ms on the
  // H200; batch 1 equal). Prefill tiles rarely split: 8 keep them at 165 registers.
  constexpr int kMergeBatch = kWarpRows == 1 ? 12 : 8;
  const int live = min(p.num_splits, num_kv_tiles);
  const int col8 = v_head_dim / 8;
  for (int i = tid; i < (row_hi - row_lo) * col8; i += kThreads) {
    const int r = i / col8;
    const int c = (i - r * col8) * 8;
    const int row = row_lo + r;
    const int64_t out_row = (q_begin + row / group) * static_cast<int64_t>(p.num_q_heads) +
                            static_cast<int64_t>(kv_head) * group + row % group;
    const bf16* partial =
        static_cast<const bf16*>(p.partial_out) + out_row * p.num_splits * v_head_dim + c;
    *reinterpret_cast<uint4*>(static_cast<bf16*>(p.out) + out_row * v_head_dim + c) =
        merge_split_columns<kMergeBatch>(partial, v_head_dim,
                                         p.partial_lse + out_row * p.num_splits, live);
  }
}

template <int kHeadDimCap, int kVHeadDimCap, bool kExact, int kWarpRows, int kWarpCols>
cudaError_t launch_attention_tiles(const TileParams& params, dim3 grid, size_t smem_bytes,
                                   cudaStream_t stream) {
  auto kernel =
      paged_attention_tile_kernel<kHeadDimCap, kVHeadDimCap, kExact, kWarpRows, kWarpCols>;
  if (smem_bytes > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
    if (err != cudaSuccess) return err;
  }
  return launch_pdl(kernel, grid, dim3(kWarpRows * kWarpCols * 32), smem_bytes, stream, params);
}

// Explicit instantiations for one head-dim capacity: decode (1 x 4 warps) and prefill
// (4 x kVHeadDimCap/128 warps) layouts.
#define LOCUS_INSTANTIATE_ATTENTION_TILES(D, DV, EXACT, WR, WC)                              \
  template cudaError_t launch_attention_tiles<D, DV, EXACT, WR, WC>(const TileParams&, dim3, \
                                                                    size_t, cudaStream_t);

}  // namespace locus::cuda::attention
