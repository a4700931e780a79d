#include "model/kv_cache.h"

#include <fmt/format.h>

namespace locus {

int64_t KvCacheShape::elements_per_token() const {
  if (kind == KvCacheKind::kMla) return kv_lora_rank + qk_rope_head_dim;
  return num_kv_heads * (head_dim + v_head_dim);
}

Expected<KvCache> allocate_kv_cache(Ops& ops, const KvCacheShape& shape, int64_t num_blocks,
                                    int64_t block_size) {
  if (num_blocks <= 0 || block_size <= 0) {
    return invalid_argument(fmt::format("kv cache: {} blocks of {} tokens; both must be positive",
                                        num_blocks, block_size));
  }
  if (shape.num_layers <= 0 || shape.elements_per_token() <= 0) {
    return invalid_argument(fmt::format("kv cache: invalid shape ({} layers, {} elements/token)",
                                        shape.num_layers, shape.elements_per_token()));
  }
  KvCache cache;
  cache.shape = shape;
  cache.num_blocks = num_blocks;
  cache.block_size = block_size;
  const DType dtype = ops.kv_cache_dtype();
  for (int64_t layer = 0; layer < shape.num_layers; ++layer) {
    KvCacheLayer l;
    if (shape.kind == KvCacheKind::kMla) {
      LOCUS_ASSIGN_OR_RETURN(
          l.k,
          ops.zeros({num_blocks, block_size, shape.kv_lora_rank + shape.qk_rope_head_dim}, dtype));
    } else {
      LOCUS_ASSIGN_OR_RETURN(
          l.k, ops.zeros({num_blocks, block_size, shape.num_kv_heads, shape.head_dim}, dtype));
      LOCUS_ASSIGN_OR_RETURN(
          l.v, ops.zeros({num_blocks, block_size, shape.num_kv_heads, shape.v_head_dim}, dtype));
    }
    cache.layers.push_back(std::move(l));
  }
  return cache;
}

}  // namespace locus
