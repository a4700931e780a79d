// Host entry points of the paged attention kernels (GQA, and MLA run as MQA over the latent
// cache). Device pointers in, launch status out; no host synchronization and no allocation
// inside, so every launch can be captured in a CUDA graph (scratch comes from `workspace`).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace locus::cuda {

// Causal attention of each new token over its sequence's cached K/V (the current step's K/V
// already written). Sequence s owns query rows [query_start_loc[s], query_start_loc[s+1]) and
// seq_lens[s] cached tokens; its new query i sits at sequence index
// seq_lens[s] - q_len + i and attends to indices max(0, idx - sliding_window + 1) .. idx.
// Sequence index j lives in block block_table[s * block_table_stride + j / block_size] at
// offset j % block_size. All data bf16 except the index arrays; softmax in f32.
struct PagedAttentionArgs {
  // q element (t, h, d) at q[t * q_token_stride + h * q_head_stride + d].
  const void* q = nullptr;
  int64_t q_token_stride = 0;
  int64_t q_head_stride = 0;
  // Element d of kv head h of the token at offset o of block b:
  //   k_cache[b * k_block_stride + o * k_token_stride + h * k_head_stride + d]  (same for v).
  // v_cache may point into the k entries (MLA: V is the first v_head_dim dims of K).
  const void* k_cache = nullptr;
  int64_t k_block_stride = 0, k_token_stride = 0, k_head_stride = 0;
  const void* v_cache = nullptr;
  int64_t v_block_stride = 0, v_token_stride = 0, v_head_stride = 0;
  // out element (t, h, d) at out[(t * num_q_heads + h) * v_head_dim + d] (contiguous).
  void* out = nullptr;
  const int32_t* query_start_loc = nullptr;  // [num_seqs + 1]
  const int32_t* seq_lens = nullptr;         // [num_seqs]
  const int32_t* block_table = nullptr;      // [num_seqs, block_table_stride], -1 padded
  int64_t block_table_stride = 0;
  int num_seqs = 0;
  int num_tokens = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;  // num_q_heads % num_kv_heads == 0; q head h reads kv head h / group
  int head_dim = 0;      // of q and k: any multiple of 8 up to 576
  int v_head_dim = 0;    // any multiple of 8 up to 512
  int block_size = 0;
  float scale = 1.0f;          // multiplies q.k before the softmax
  int64_t sliding_window = 0;  // 0 = full causal attention
  // Host-known upper bounds used only to size the grid (a captured graph passes the largest
  // values it will ever replay with); kernels read the true lengths from the device arrays.
  int max_query_len = 0;
  int max_seq_len = 0;
  void* workspace = nullptr;  // at least paged_attention_workspace_bytes(*this) bytes
  size_t workspace_bytes = 0;
  // Optional: zero-initialized int counters that stay zero between launches (the kernel resets
  // what it uses). With at least paged_attention_counter_slots(*this) of them, split-KV merges
  // inside the attention kernel instead of a second launch.
  int* split_counters = nullptr;
  size_t split_counter_slots = 0;
};

// Scratch the launch needs (split-KV partial outputs and log-sum-exps), from the shape fields
// and the two upper bounds only.
size_t paged_attention_workspace_bytes(const PagedAttentionArgs& args);
// The split counters the launch would use (0 when it does not split).
size_t paged_attention_counter_slots(const PagedAttentionArgs& args);

// Returns cudaErrorInvalidValue for unsupported shapes (head dims, strides not multiples of 8
// elements, too-small workspace) instead of launching.
cudaError_t launch_paged_attention(const PagedAttentionArgs& args, cudaStream_t stream);

}  // namespace locus::cuda
