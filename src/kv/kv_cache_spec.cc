// Sizing of KV blocks from a model's KV spec.
#include "kv/kv_cache_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace locus {

KVCacheSpec KVCacheSpec::full_attention(int num_layers, int num_kv_heads, int head_dim, DType dtype,
                                        int block_size) {
  KVCacheSpec s;
  s.kind = KVCacheKind::kFullAttention;
  s.num_layers = num_layers;
  s.num_kv_heads = num_kv_heads;
  s.head_dim = head_dim;
  s.dtype = dtype;
  s.block_size = block_size;
  return s;
}

KVCacheSpec KVCacheSpec::mla(int num_layers, int kv_lora_rank, int qk_rope_head_dim, DType dtype,
                             int block_size) {
  KVCacheSpec s;
  s.kind = KVCacheKind::kMLA;
  s.num_layers = num_layers;
  s.kv_lora_rank = kv_lora_rank;
  s.qk_rope_head_dim = qk_rope_head_dim;
  s.dtype = dtype;
  s.block_size = block_size;
  return s;
}

Status KVCacheSpec::validate() const {
  if (block_size <= 0)
    return invalid_argument(fmt::format("block_size must be positive, got {}", block_size));
  if (num_layers <= 0)
    return invalid_argument(
        fmt::format("KV cache num_layers must be positive, got {}", num_layers));
  if (dtype_bits(dtype) < 8) {
    return unsupported(
        fmt::format("KV cache dtype {} is sub-byte; not supported", dtype_name(dtype)));
  }
  if (kind == KVCacheKind::kFullAttention) {
    if (num_kv_heads <= 0 || head_dim <= 0) {
      return invalid_argument(fmt::format(
          "full-attention KV cache needs num_kv_heads > 0 and head_dim > 0, got {} and {}",
          num_kv_heads, head_dim));
    }
  } else if (kv_lora_rank <= 0 || qk_rope_head_dim < 0) {
    return invalid_argument(
        fmt::format("MLA KV cache needs kv_lora_rank > 0 and qk_rope_head_dim >= 0, got {} and {}",
                    kv_lora_rank, qk_rope_head_dim));
  }
  return Status::ok();
}

int64_t KVCacheSpec::bytes_per_token_per_layer() const {
  const int64_t elem = dtype_bits(dtype) / 8;
  if (kind == KVCacheKind::kFullAttention) {
    return 2 * static_cast<int64_t>(num_kv_heads) * head_dim * elem;
  }
  return (static_cast<int64_t>(kv_lora_rank) + qk_rope_head_dim) * elem;
}

int64_t KVCacheSpec::bytes_per_block() const {
  return bytes_per_token_per_layer() * block_size * num_layers;
}

Expected<int> num_blocks_for_budget(const KVCacheSpec& spec, int64_t budget_bytes) {
  LOCUS_RETURN_IF_ERROR(spec.validate());
  const int64_t per_block = spec.bytes_per_block();
  const int64_t blocks = budget_bytes > 0 ? budget_bytes / per_block : 0;
  if (blocks <= 0) {
    return resource_exhausted(fmt::format(
        "KV cache budget of {} bytes holds no block of {} bytes ({} tokens x {} layers)",
        budget_bytes, per_block, spec.block_size, spec.num_layers));
  }
  // Block ids are int32 everywhere (block tables are int32 on the device).
  return static_cast<int>(std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max()));
}

}  // namespace locus
