// The paged KV cache a model reads and writes: one set of tensors per decoder layer, all of
// num_blocks blocks of block_size tokens. Block ids and slots (block * block_size + offset) are
// shared by every layer, so one block table serves the whole model. Which blocks a sequence owns
// is the KV manager's business (src/kv); this file only holds the memory.
//
// Layout per layer (kv_cache_dtype() of the backend, f32 on the CPU):
//   GQA: k [num_blocks, block_size, num_kv_heads, head_dim]
//        v [num_blocks, block_size, num_kv_heads, v_head_dim]     (flashinfer's "NHD")
//   MLA: k [num_blocks, block_size, kv_lora_rank + qk_rope_head_dim], v undefined: the
//        normalized latent c_kv followed by the rotated shared key k_pe (vLLM's MLA layout).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/ops.h"
#include "core/status.h"
#include "core/tensor.h"

namespace locus {

enum class KvCacheKind : uint8_t { kGqa, kMla };

// What one token stores per layer.
struct KvCacheShape {
  KvCacheKind kind = KvCacheKind::kGqa;
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;      // GQA
  int64_t head_dim = 0;          // GQA
  int64_t v_head_dim = 0;        // GQA
  int64_t kv_lora_rank = 0;      // MLA
  int64_t qk_rope_head_dim = 0;  // MLA

  // Elements per token per layer (K and V together for GQA).
  int64_t elements_per_token() const;
};

struct KvCacheLayer {
  Tensor k;  // GQA keys, or the MLA latent cache
  Tensor v;  // GQA values; undefined for MLA
};

struct KvCache {
  KvCacheShape shape;
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  std::vector<KvCacheLayer> layers;
};

// Allocates (zeroed) caches for every layer on `ops`'s device.
Expected<KvCache> allocate_kv_cache(Ops& ops, const KvCacheShape& shape, int64_t num_blocks,
                                    int64_t block_size);

}  // namespace locus
