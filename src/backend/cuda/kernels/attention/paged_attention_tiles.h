// What the paged attention dispatcher (paged_attention.cu) and the per-head-dim instantiation
// files share: the kernel parameters and the launcher declarations. Declarations only, so the
// dispatcher never compiles a kernel body itself; the bodies live in paged_attention.cuh.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace locus::cuda::attention {

// Tile shapes shared by the host plan and the kernels: 64 keys per KV tile, 16 query rows per
// warp row; a CTA is kWarpRows x kWarpCols warps.
constexpr int kKvTile = 64;
constexpr int kRowsPerWarp = 16;

struct TileParams {
  const void* q = nullptr;  // bf16
  int64_t q_token_stride = 0, q_head_stride = 0;
  const void* k_cache = nullptr;  // bf16
  int64_t k_block_stride = 0, k_token_stride = 0, k_head_stride = 0;
  const void* v_cache = nullptr;  // bf16
  int64_t v_block_stride = 0, v_token_stride = 0, v_head_stride = 0;
  bool v_in_k = false;  // V is the first v_head_dim dims of the K rows: read K only
  void* out = nullptr;  // bf16 [tokens, q_heads, v_head_dim]
  // num_splits > 1: each split's normalized output, bf16 [tokens, q_heads, splits, v_head_dim],
  // and its log-sum-exp in log2 units, f32 [tokens, q_heads, splits] (merge_splits.cuh).
  void* partial_out = nullptr;
  float* partial_lse = nullptr;
  const int32_t* query_start_loc = nullptr;
  const int32_t* seq_lens = nullptr;
  const int32_t* block_table = nullptr;
  int64_t block_table_stride = 0;
  int num_seqs = 0;
  // Every sequence has at most one row tile and grid.x = num_seqs (decode): CTA x takes
  // sequence x, with no scan over query_start_loc to find it.
  bool tile_per_seq = false;
  // The KV rows older than the step are loaded before pdl_wait (LOCUS_CUDA_ATTN_PRELOAD=0: after).
  bool preload_old_kv = true;
  int num_q_heads = 0;
  int group = 1;  // q heads per kv head
  int head_dim = 0;
  int v_head_dim = 0;
  int block_size = 0;
  int block_shift = -1;     // log2(block_size) when it is a power of two (shifts, not divisions)
  float scale_log2 = 0.0f;  // scale * log2(e): scores go straight into exp2f
  int sliding_window = 0;   // 0 = none
  int num_splits = 1;
  // num_splits > 1: one zeroed counter per (row tile, kv head) = grid.x * grid.y; the last
  // split to finish merges and resets it. Null: merge_splits_kernel merges instead.
  int* split_counters = nullptr;
};

constexpr int round_up_16(int x) {  // constexpr: callable from device code too
  return (x + 15) & ~15;
}

// K tiles the one-warp-per-row prefill layouts hold (2: the next tile's K loads while this one
// computes).
constexpr int kPrefillKStages = 2;

// Dynamic shared memory of one CTA: Q tile, K tile, V tile (absent when V lives in K), P tile
// and two cross-warp row reductions. The prefill layouts with one warp across a row
// (warp_cols 1) hold kPrefillKStages K tiles and keep P and the reductions in registers.
// Rows are padded by 16 bytes so that the eight rows an ldmatrix reads fall in eight different
// bank groups.
inline size_t tile_smem_bytes(int warp_rows, int warp_cols, int head_dim, int v_head_dim,
                              bool v_in_k) {
  const bool pipelined = warp_cols == 1 && warp_rows > 1;
  const size_t stages = pipelined ? kPrefillKStages : 1;
  const size_t rows = static_cast<size_t>(warp_rows) * kRowsPerWarp;
  const size_t k_row = static_cast<size_t>(round_up_16(head_dim) + 8) * 2;
  const size_t v_row = static_cast<size_t>(round_up_16(v_head_dim) + 8) * 2;
  size_t bytes = rows * k_row + stages * kKvTile * k_row;
  if (!v_in_k) bytes += kKvTile * v_row;
  if (pipelined) return bytes;
  bytes += rows * (kKvTile + 8) * 2;
  bytes += 2 * static_cast<size_t>(warp_cols) * rows * sizeof(float);
  return bytes;
}

// One instantiation per (head-dim capacity, exactness, warp layout), explicitly instantiated in
// paged_attention_d{64,128,256,576}.cu.
template <int kHeadDimCap, int kVHeadDimCap, bool kExact, int kWarpRows, int kWarpCols>
cudaError_t launch_attention_tiles(const TileParams& params, dim3 grid, size_t smem_bytes,
                                   cudaStream_t stream);

}  // namespace locus::cuda::attention
