// The attention kernels' building blocks: async copies, ldmatrix and mma.sync wrappers, and the
// loaders that copy a KV tile from the paged cache into shared memory. Device code only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels/attention/paged_attention_tiles.h"

namespace locus::cuda::attention {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; src_bytes 0 writes zeros (keys past the range).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c += a (16x16, row) * b (16x8, col), bf16 in, f32 accumulate.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo (lower address)
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Where key j's row starts in the cache, from `base` (the cache, or the cache plus a fixed
// column offset). kPow2: the block size is 1 << block_shift, so shifts instead of integer
// divisions (Nsight Compute found the prefill loop ALU-bound: ALU the busiest pipe at 36%, 2.1
// instructions issued per cycle).
template <bool kPow2>
__device__ __forceinline__ const bf16* kv_row(const bf16* base, int64_t block_stride,
                                              int64_t token_stride, const int32_t* block_table,
                                              int block_size, int block_shift, int j) {
  int block_index, slot;
  if constexpr (kPow2) {
    block_index = j >> block_shift;
    slot = j & (block_size - 1);
  } else {
    block_index = j / block_size;
    slot = j % block_size;
  }
  return base + static_cast<int64_t>(block_table[block_index]) * block_stride +
         static_cast<int64_t>(slot) * token_stride;
}

// Loads rows [r_begin, r_end) of a kKvTile-row tile of K or V (dim elements each) for keys
// j0 + r into shared memory; keys past kv_last are zero-filled so that masked probabilities (0)
// never meet garbage (0 * NaN = NaN).
template <int kThreads, bool kPow2>
__device__ __forceinline__ void load_kv_tile_impl(const bf16* cache, int64_t block_stride,
                                                  int64_t token_stride, int64_t head_offset,
                                                  const int32_t* block_table, int block_size,
                                                  int block_shift, int dim, int j0, int kv_last,
                                                  bf16* dst, int dst_stride, int r_begin,
                                                  int r_end) {
  const int chunks = dim / 8;
  for (int idx = threadIdx.x; idx < (r_end - r_begin) * chunks; idx += kThreads) {
    const int r = r_begin + idx / chunks;
    const int c = idx % chunks;
    const int j = j0 + r;
    const bf16* src = cache;
    int bytes = 0;
    if (j <= kv_last) {
      src = kv_row<kPow2>(cache, block_stride, token_stride, block_table, block_size, block_shift,
                          j) +
            head_offset + c * 8;
      bytes = 16;
    }
    cp_async_16(dst + r * dst_stride + c * 8, src, bytes);
  }
}

// The loader of the decode and general loops: one code path with divisions. With the prefill
// loaders below (shifts, whole tiles) in the decode loop, batch-1 and batch-8 decode got
// 1.5-1.9% slower on the H200 and batch 256 5% faster (docs/benchmarks.md).
template <int kThreads>
__device__ __forceinline__ void load_kv_tile(const bf16* cache, int64_t block_stride,
                                             int64_t token_stride, int64_t head_offset,
                                             const int32_t* block_table, int block_size, int dim,
                                             int j0, int kv_last, bf16* dst, int dst_stride,
                                             int r_begin = 0, int r_end = kKvTile) {
  load_kv_tile_impl<kThreads, false>(cache, block_stride, token_stride, head_offset, block_table,
                                     block_size, 0, dim, j0, kv_last, dst, dst_stride, r_begin,
                                     r_end);
}

// Whether load_kv_tile_whole can take a head dim: the threads cover whole rows.
constexpr bool whole_rows_fit(int threads, int dim) {
  return dim % 8 == 0 && threads % (dim / 8) == 0 && kKvTile % (threads / (dim / 8)) == 0;
}

// load_kv_tile for a whole tile of a compile-time head dim: each thread keeps one 16-byte
// column and walks the rows with a constant stride, so the loop unrolls and the row and column
// arithmetic is hoisted.
template <int kThreads, int kDim, bool kPow2>
__device__ __forceinline__ void load_kv_tile_whole_impl(const bf16* cache, int64_t block_stride,
                                                        int64_t token_stride, int64_t head_offset,
                                                        const int32_t* block_table, int block_size,
                                                        int block_shift, int j0, int kv_last,
                                                        bf16* dst, int dst_stride) {
  constexpr int kChunks = kDim / 8;
  static_assert(whole_rows_fit(kThreads, kDim), "threads cover whole rows");
  constexpr int kRowStep = kThreads / kChunks;
  const int c8 = (static_cast<int>(threadIdx.x) % kChunks) * 8;
  const int r0 = static_cast<int>(threadIdx.x) / kChunks;
  const bf16* base = cache + head_offset + c8;
#pragma unroll
  for (int i = 0; i < kKvTile / kRowStep; ++i) {
    const int r = r0 + i * kRowStep;
    const int j = j0 + r;
    const bf16* src = cache;
    int bytes = 0;
    if (j <= kv_last) {
      src =
          kv_row<kPow2>(base, block_stride, token_stride, block_table, block_size, block_shift, j);
      bytes = 16;
    }
    cp_async_16(dst + r * dst_stride + c8, src, bytes);
  }
}

template <int kThreads, int kDim>
__device__ __forceinline__ void load_kv_tile_whole(const bf16* cache, int64_t block_stride,
                                                   int64_t token_stride, int64_t head_offset,
                                                   const int32_t* block_table, int block_size,
                                                   int block_shift, int j0, int kv_last, bf16* dst,
                                                   int dst_stride) {
  if (block_shift >= 0) {
    load_kv_tile_whole_impl<kThreads, kDim, true>(cache, block_stride, token_stride, head_offset,
                                                  block_table, block_size, block_shift, j0, kv_last,
                                                  dst, dst_stride);
  } else {
    load_kv_tile_whole_impl<kThreads, kDim, false>(cache, block_stride, token_stride, head_offset,
                                                   block_table, block_size, block_shift, j0,
                                                   kv_last, dst, dst_stride);
  }
}

// Rows [r0, kKvTile) of a KV tile for the prefill loop: load_kv_tile_whole where the head dim is
// a compile-time constant that whole rows of threads cover and the tile is whole, rows one by
// one otherwise; shifts wherever the block size allows.
template <int kThreads, bool kExact, int kDimCap>
__device__ __forceinline__ void load_kv_rows(const bf16* cache, int64_t block_stride,
                                             int64_t token_stride, int64_t head_offset,
                                             const int32_t* block_table, int block_size,
                                             int block_shift, int dim, int j0, int kv_last,
                                             bf16* dst, int dst_stride, int r0) {
  if constexpr (kExact && whole_rows_fit(kThreads, kDimCap)) {
    if (r0 == 0) {
      load_kv_tile_whole<kThreads, kDimCap>(cache, block_stride, token_stride, head_offset,
                                            block_table, block_size, block_shift, j0, kv_last, dst,
                                            dst_stride);
      return;
    }
  }
  if (block_shift >= 0) {  // uniform across the grid
    load_kv_tile_impl<kThreads, true>(cache, block_stride, token_stride, head_offset, block_table,
                                      block_size, block_shift, dim, j0, kv_last, dst, dst_stride,
                                      r0, kKvTile);
  } else {
    load_kv_tile_impl<kThreads, false>(cache, block_stride, token_stride, head_offset, block_table,
                                       block_size, block_shift, dim, j0, kv_last, dst, dst_stride,
                                       r0, kKvTile);
  }
}

// S = Q K^T for a warp's 16 query rows (from row q_row0 of s_q) and the kSTiles * 8 keys from row
// k_col0 of the K tile s_k, over d_pad / 16 steps of the head dim (unrolled kUnroll times).
template <int kSTiles, int kUnroll>
__device__ __forceinline__ void qk_scores(float (&s)[kSTiles][4], const bf16* s_q, int q_row0,
                                          const bf16* s_k, int k_col0, int k_stride, int d_pad,
                                          int lane) {
#pragma unroll
  for (int j = 0; j < kSTiles; ++j)
    s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
  const bf16* q_frag = s_q + (q_row0 + (lane & 15)) * k_stride + (lane >> 4) * 8;
  const bf16* k_frag =
      s_k + (k_col0 + (lane >> 4) * 8 + (lane & 7)) * k_stride + ((lane >> 3) & 1) * 8;
  const int k_steps = d_pad / 16;
#pragma unroll(kUnroll)
  for (int ks = 0; ks < k_steps; ++ks) {
    uint32_t a[4];
    ldmatrix_x4(a, q_frag + ks * 16);
#pragma unroll
    for (int np = 0; np < kSTiles / 2; ++np) {
      uint32_t b[4];
      ldmatrix_x4(b, k_frag + np * 16 * k_stride + ks * 16);
      mma_bf16(s[2 * np], a, b[0], b[1]);
      mma_bf16(s[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// Scales the scores into the log2 domain, masks keys outside each row's [row_first, row_pos]
// (-inf), and takes each row's maximum over this thread's entries. key0: the key of column 0.
template <int kSTiles>
__device__ __forceinline__ void mask_scores(float (&s)[kSTiles][4], int key0, int lane,
                                            const int (&row_first)[2], const int (&row_pos)[2],
                                            float scale_log2, float (&tile_max)[2]) {
#pragma unroll
  for (int j = 0; j < kSTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e >> 1;
      const int key = key0 + j * 8 + (lane & 3) * 2 + (e & 1);
      const bool visible = key >= row_first[h] && key <= row_pos[h];
      s[j][e] = visible ? s[j][e] * scale_log2 : -INFINITY;
      tile_max[h] = fmaxf(tile_max[h], s[j][e]);
    }
  }
}

// The online softmax's rescale of the output accumulators by each row's alpha.
template <int kOTiles>
__device__ __forceinline__ void rescale_rows(float (&o)[kOTiles][4], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < kOTiles; ++j) {
    o[j][0] *= alpha[0];
    o[j][1] *= alpha[0];
    o[j][2] *= alpha[1];
    o[j][3] *= alpha[1];
  }
}

}  // namespace locus::cuda::attention
