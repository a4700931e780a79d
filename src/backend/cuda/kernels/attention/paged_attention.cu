// Host side of paged attention: validates the shape, plans the grid (tile layout, KV splits)
// from host-known fields only, and launches the tile kernel and, for split KV, the merge.
// No host synchronization, allocation or memset: safe inside CUDA graph capture.
#include <climits>
#include <cstdlib>

#include "backend/cuda/kernels/attention/attention_launch.h"
#include "backend/cuda/kernels/attention/merge_splits.cuh"
#include "backend/cuda/kernels/attention/paged_attention_tiles.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace locus::cuda {
namespace {

using attention::kRowsPerWarp;
using attention::TileParams;

// Split KV until the grid has about this many CTAs (4 per SM of a 132-SM H100/H200; decode CTAs
// are small), but never below min_split_keys() keys per split (each split costs a partial write and
// a merge read of v_head_dim floats per row).
constexpr int64_t kTargetCtas = 132 * 4;
// One 64-key tile per split: at decode a CTA's time is mostly its chain of dependent loads,
// not its keys. H200, 1088 keys, with the streaming dense GEMVs: batch 1 4.25 -> 4.16 ms,
// batch 8 11.27 either way (with the warp GEMVs batch 8 went 11.45 -> 11.77 ms instead).
constexpr int64_t kDefaultMinSplitKeys = 64;
// LOCUS_CUDA_ATTN_MIN_SPLIT_KEYS overrides the floor (a multiple of the 64-key tile) to
// measure the trade between shorter splits and more partials to merge.
int64_t min_split_keys() {
  static const int64_t keys = [] {
    const char* v = std::getenv("LOCUS_CUDA_ATTN_MIN_SPLIT_KEYS");
    const long parsed = v != nullptr ? std::strtol(v, nullptr, 10) : 0;
    return parsed >= 64 && parsed % 64 == 0 ? static_cast<int64_t>(parsed) : kDefaultMinSplitKeys;
  }();
  return keys;
}
constexpr int64_t kMaxSplits = 256;

struct Plan {
  bool valid = false;
  int head_dim_cap = 0;
  bool exact = false;
  bool decode = false;  // 16-row tiles (1 x 4 warps) instead of 64-row tiles
  int warp_rows = 0;
  int warp_cols = 0;
  int64_t tiles = 0;  // grid.x: upper bound on the row tiles of all sequences
  int splits = 1;
  bool v_in_k = false;
  size_t smem_bytes = 0;
  size_t workspace_bytes = 0;
};

bool multiple_of_8(int64_t x) {
  return x >= 0 && x % 8 == 0;
}

Plan make_plan(const PagedAttentionArgs& a) {
  Plan plan;
  if (a.num_seqs < 1 || a.num_tokens < 1 || a.num_q_heads < 1 || a.num_kv_heads < 1 ||
      a.num_q_heads % a.num_kv_heads != 0)
    return plan;
  if (a.head_dim < 8 || a.head_dim > 576 || a.head_dim % 8 != 0) return plan;
  if (a.v_head_dim < 8 || a.v_head_dim > 512 || a.v_head_dim % 8 != 0) return plan;
  if (a.block_size < 1 || a.max_query_len < 1 || a.max_seq_len < 1 || a.block_table_stride < 1)
    return plan;
  for (int64_t stride : {a.q_token_stride, a.q_head_stride, a.k_block_stride, a.k_token_stride,
                         a.k_head_stride, a.v_block_stride, a.v_token_stride, a.v_head_stride}) {
    if (!multiple_of_8(stride)) return plan;
  }
  const int64_t group = a.num_q_heads / a.num_kv_heads;
  if (static_cast<int64_t>(a.max_query_len) * group > INT_MAX / 2) return plan;

  const int d = a.head_dim;
  const int dv = a.v_head_dim;
  if (d == dv && (d == 64 || d == 128 || d == 256)) {
    plan.head_dim_cap = d;
    plan.exact = true;
  } else {
    for (int cap : {64, 128, 256, 576}) {
      if (d <= cap && dv <= (cap > 512 ? 512 : cap)) {
        plan.head_dim_cap = cap;
        break;
      }
    }
  }
  const int v_cap = plan.head_dim_cap > 512 ? 512 : plan.head_dim_cap;
  plan.decode = static_cast<int64_t>(a.max_query_len) * group <= kRowsPerWarp;
  plan.warp_rows = plan.decode ? 1 : 4;
  plan.warp_cols = plan.decode ? 4 : (v_cap / 128 > 1 ? v_cap / 128 : 1);
  const int64_t rows = static_cast<int64_t>(plan.warp_rows) * kRowsPerWarp;

  // Sum over sequences of ceil(q_len * group / rows) is at most both of these.
  const int64_t per_seq_bound = a.num_seqs * ((a.max_query_len * group + rows - 1) / rows);
  const int64_t token_bound = (a.num_tokens * group + a.num_seqs * (rows - 1)) / rows;
  plan.tiles = per_seq_bound < token_bound ? per_seq_bound : token_bound;
  if (plan.tiles > INT_MAX) return plan;

  const int64_t ctas = plan.tiles * a.num_kv_heads;
  const int64_t target = plan.decode ? kTargetCtas : kTargetCtas / 2;
  int64_t splits = 1;
  if (ctas < target) {
    splits = (target + ctas - 1) / ctas;
    const int64_t by_len = (a.max_seq_len + min_split_keys() - 1) / min_split_keys();
    if (splits > by_len) splits = by_len;
    if (splits > kMaxSplits) splits = kMaxSplits;
    if (splits < 1) splits = 1;
  }
  plan.splits = static_cast<int>(splits);

  plan.v_in_k = a.v_cache == a.k_cache && a.v_block_stride == a.k_block_stride &&
                a.v_token_stride == a.k_token_stride && a.v_head_stride == a.k_head_stride &&
                dv <= d;
  plan.smem_bytes = attention::tile_smem_bytes(plan.warp_rows, plan.warp_cols, d, dv, plan.v_in_k);
  if (plan.splits > 1) {
    plan.workspace_bytes = static_cast<size_t>(a.num_tokens) * static_cast<size_t>(a.num_q_heads) *
                           static_cast<size_t>(plan.splits) *
                           (static_cast<size_t>(dv) * 2 + sizeof(float));
  }
  plan.valid = true;
  return plan;
}

template <int kCap, int kVCap, bool kExact>
cudaError_t launch_for_cap(const TileParams& params, const Plan& plan, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.tiles),
                  static_cast<unsigned>(params.num_q_heads / params.group),
                  static_cast<unsigned>(plan.splits));
  if (plan.decode)
    return attention::launch_attention_tiles<kCap, kVCap, kExact, 1, 4>(params, grid,
                                                                        plan.smem_bytes, stream);
  constexpr int kPrefillCols = kVCap / 128 > 1 ? kVCap / 128 : 1;
  return attention::launch_attention_tiles<kCap, kVCap, kExact, 4, kPrefillCols>(
      params, grid, plan.smem_bytes, stream);
}

// One CTA per output row (token, q head); thread i merges columns [8i, 8i + 8).
__global__ void merge_splits_kernel(const __nv_bfloat16* partial_out, const float* partial_lse,
                                    int num_splits, int v_head_dim, __nv_bfloat16* out) {
  pdl_launch_dependents();
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* partial = partial_out + row * num_splits * v_head_dim;
  const float* lse = partial_lse + row * num_splits;
  for (int c = threadIdx.x * 8; c < v_head_dim; c += blockDim.x * 8) {
    *reinterpret_cast<uint4*>(out + row * v_head_dim + c) =
        attention::merge_split_columns<16>(partial + c, v_head_dim, lse, num_splits);
  }
}

bool aligned_16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

size_t paged_attention_workspace_bytes(const PagedAttentionArgs& args) {
  const Plan plan = make_plan(args);
  return plan.valid ? plan.workspace_bytes : 0;
}

size_t paged_attention_counter_slots(const PagedAttentionArgs& args) {
  const Plan plan = make_plan(args);
  if (!plan.valid || plan.splits == 1) return 0;
  return static_cast<size_t>(plan.tiles) * static_cast<size_t>(args.num_kv_heads);
}

cudaError_t launch_paged_attention(const PagedAttentionArgs& a, cudaStream_t stream) {
  if (a.num_tokens == 0) return cudaSuccess;  // nothing to attend
  const Plan plan = make_plan(a);
  if (!plan.valid) return cudaErrorInvalidValue;
  if (!a.q || !a.k_cache || !a.v_cache || !a.out || !a.query_start_loc || !a.seq_lens ||
      !a.block_table)
    return cudaErrorInvalidValue;
  if (!aligned_16(a.q) || !aligned_16(a.k_cache) || !aligned_16(a.v_cache) || !aligned_16(a.out))
    return cudaErrorInvalidValue;
  if (plan.workspace_bytes > 0 &&
      (!a.workspace || !aligned_16(a.workspace) || a.workspace_bytes < plan.workspace_bytes))
    return cudaErrorInvalidValue;

  TileParams p;
  p.q = a.q;
  p.q_token_stride = a.q_token_stride;
  p.q_head_stride = a.q_head_stride;
  p.k_cache = a.k_cache;
  p.k_block_stride = a.k_block_stride;
  p.k_token_stride = a.k_token_stride;
  p.k_head_stride = a.k_head_stride;
  p.v_cache = a.v_cache;
  p.v_block_stride = a.v_block_stride;
  p.v_token_stride = a.v_token_stride;
  p.v_head_stride = a.v_head_stride;
  p.v_in_k = plan.v_in_k;
  p.out = a.out;
  const size_t partial_values =
      static_cast<size_t>(a.num_tokens) * static_cast<size_t>(a.num_q_heads) *
      static_cast<size_t>(plan.splits) * static_cast<size_t>(a.v_head_dim);
  if (plan.splits > 1) {  // bf16 outputs (16-byte rows), then the f32 log-sum-exps
    p.partial_out = a.workspace;
    p.partial_lse = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + partial_values * 2);
  }
  p.query_start_loc = a.query_start_loc;
  p.seq_lens = a.seq_lens;
  p.block_table = a.block_table;
  p.block_table_stride = a.block_table_stride;
  p.num_seqs = a.num_seqs;
  p.tile_per_seq = plan.decode && plan.tiles == a.num_seqs;
  // LOCUS_CUDA_ATTN_PRELOAD=0 keeps every load after pdl_wait (to measure the early ones).
  static const bool preload = [] {
    const char* v = std::getenv("LOCUS_CUDA_ATTN_PRELOAD");
    return v == nullptr || v[0] != '0';
  }();
  p.preload_old_kv = preload;
  p.num_q_heads = a.num_q_heads;
  p.group = a.num_q_heads / a.num_kv_heads;
  p.head_dim = a.head_dim;
  p.v_head_dim = a.v_head_dim;
  p.block_size = a.block_size;
  if ((a.block_size & (a.block_size - 1)) == 0) {
    p.block_shift = 0;
    while ((1 << p.block_shift) < a.block_size)
      ++p.block_shift;
  }
  p.scale_log2 = a.scale * 1.4426950408889634f;
  // A window at least as long as any sequence masks nothing.
  p.sliding_window =
      a.sliding_window > 0 && a.sliding_window < INT_MAX ? static_cast<int>(a.sliding_window) : 0;
  p.num_splits = plan.splits;
  const bool fused_merge = plan.splits > 1 && a.split_counters != nullptr &&
                           a.split_counter_slots >= static_cast<size_t>(plan.tiles) *
                                                        static_cast<size_t>(a.num_kv_heads);
  if (fused_merge) p.split_counters = a.split_counters;

  cudaError_t err = cudaSuccess;
  switch (plan.head_dim_cap) {
    case 64:
      err = plan.exact ? launch_for_cap<64, 64, true>(p, plan, stream)
                       : launch_for_cap<64, 64, false>(p, plan, stream);
      break;
    case 128:
      err = plan.exact ? launch_for_cap<128, 128, true>(p, plan, stream)
                       : launch_for_cap<128, 128, false>(p, plan, stream);
      break;
    case 256:
      err = plan.exact ? launch_for_cap<256, 256, true>(p, plan, stream)
                       : launch_for_cap<256, 256, false>(p, plan, stream);
      break;
    case 576:
      err = launch_for_cap<576, 512, false>(p, plan, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  if (err != cudaSuccess || plan.splits == 1 || fused_merge) return err;

  const int64_t rows = static_cast<int64_t>(a.num_tokens) * a.num_q_heads;
  merge_splits_kernel<<<static_cast<unsigned>(rows), 64, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(p.partial_out), p.partial_lse, plan.splits, a.v_head_dim,
      static_cast<__nv_bfloat16*>(a.out));
  return cudaGetLastError();
}

}  // namespace locus::cuda
