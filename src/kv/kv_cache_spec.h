// What a model stores per token in its KV cache, so that the KV manager can turn a memory budget
// into a number of blocks. The byte layout inside a block belongs to the backend; nothing here
// may assume K and V exist (MLA stores one latent vector per token instead).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace locus {

enum class KVCacheKind : uint8_t {
  kFullAttention,  // MHA/GQA: a K and a V vector per kv head per token
  kMLA,            // multi-head latent attention: one (kv_lora_rank + rope dim) latent per token
};

// Per-rank numbers: with tensor parallelism the caller passes the kv heads this rank holds.
struct KVCacheSpec {
  KVCacheKind kind = KVCacheKind::kFullAttention;
  int block_size = 16;  // tokens per block (--block-size)
  int num_layers = 0;
  int num_kv_heads = 0;      // kFullAttention only
  int head_dim = 0;          // kFullAttention only
  int kv_lora_rank = 0;      // kMLA only
  int qk_rope_head_dim = 0;  // kMLA only
  DType dtype = DType::kBF16;

  static KVCacheSpec full_attention(int num_layers, int num_kv_heads, int head_dim, DType dtype,
                                    int block_size = 16);
  static KVCacheSpec mla(int num_layers, int kv_lora_rank, int qk_rope_head_dim, DType dtype,
                         int block_size = 16);

  // Names the first field that makes the spec unusable.
  Status validate() const;
  // GQA: 2 * num_kv_heads * head_dim * dtype bytes; MLA: (kv_lora_rank + rope dim) * dtype bytes.
  int64_t bytes_per_token_per_layer() const;
  // One block across all layers: what one block id costs in device memory.
  int64_t bytes_per_block() const;
};

// How many blocks of `spec` fit in `budget_bytes` (rounded down). Errors when not even one does.
Expected<int> num_blocks_for_budget(const KVCacheSpec& spec, int64_t budget_bytes);

}  // namespace locus
