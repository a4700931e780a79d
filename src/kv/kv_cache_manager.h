// KV-cache manager: per-request block tables on top of the block pool, slot allocation for new
// tokens (and lookahead), and automatic prefix caching over full blocks. Single-threaded (the
// engine thread); it deals in block ids, never in KV memory, and knows nothing of scheduling.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace locus {

using RequestId = uint64_t;

struct KVCacheConfig {
  int num_blocks = 0;
  int block_size = 16;
  bool enable_prefix_caching = true;  // --enable-prefix-caching / --no-enable-prefix-caching
};

// What the manager needs to know about a request; a view, valid for the duration of one call.
struct KVRequestView {
  RequestId request_id = 0;
  std::span<const int32_t> token_ids;  // every known token: the prompt, then the outputs
  int num_computed_tokens = 0;         // tokens whose KV already sits in this request's blocks
  uint64_t cache_salt_key = 0;         // cache_salt_key(salt); 0 = no salt
  bool skip_cache_reads = false;       // prompt logprobs need every prompt position computed
};

// A prefix hit: cached blocks not yet referenced by the request, and the tokens they hold.
struct ComputedBlocks {
  std::vector<BlockId> blocks;
  int num_computed_tokens = 0;
};

// Cumulative counters; rates are derived by whoever exports metrics.
struct PrefixCacheStats {
  uint64_t requests = 0;  // lookups
  uint64_t queries = 0;   // tokens looked up
  uint64_t hits = 0;      // tokens found cached
};

class KVCacheManager {
 public:
  explicit KVCacheManager(const KVCacheConfig& config);

  int block_size() const { return block_size_; }
  bool prefix_caching_enabled() const { return enable_caching_; }

  // The longest run of cached full blocks at the start of a request that holds no blocks yet
  // (new or preempted). Never the whole sequence: at least the last token is recomputed so that
  // the model produces its logits. Every call counts toward the hit-rate stats (as in vLLM, a
  // request retried while memory is short counts again). The blocks are not yet
  // referenced: pass them to allocate_slots in the same step, before anything else allocates.
  ComputedBlocks get_computed_blocks(const KVRequestView& request);

  // Makes this request's blocks cover num_computed_tokens + hits + num_new_tokens tokens plus
  // num_lookahead_tokens spare slots (speculative decoding), and registers blocks that this step
  // fills completely in the prefix cache. Returns the request's block table, which stays valid
  // (same object, maybe grown) until free(); nullptr when the pool cannot supply the blocks, in
  // which case nothing changed and the caller preempts someone and retries.
  const std::vector<BlockId>* allocate_slots(const KVRequestView& request, int num_new_tokens,
                                             const ComputedBlocks* new_computed = nullptr,
                                             int num_lookahead_tokens = 0);

  // Drops every block of the request (finish, abort or preemption). Tail blocks are released
  // first, so they are evicted before the shared prefix blocks. Unknown ids are ignored.
  void free(RequestId request_id);

  // The request's block table (empty if it holds none).
  std::span<const BlockId> block_ids(RequestId request_id) const;

  int num_blocks() const { return pool_.num_blocks(); }
  int num_free_blocks() const { return pool_.num_free_blocks(); }
  double usage() const { return pool_.usage(); }
  const PrefixCacheStats& prefix_cache_stats() const { return stats_; }
  const BlockPool& block_pool() const { return pool_; }
  size_t num_tracked_requests() const { return requests_.size(); }

  // See BlockPool::reset_prefix_cache.
  bool reset_prefix_cache() { return pool_.reset_prefix_cache(); }

  // Pool invariants plus: every block's ref count equals the number of block tables holding it.
  Status check_invariants() const;

 private:
  struct RequestBlocks {
    std::vector<BlockId> blocks;
    // Hashes of the request's full blocks, extended lazily as tokens become known. Kept until
    // free() so a waiting request that is retried every step does not rehash its prompt.
    std::vector<BlockHash> block_hashes;
    // Leading blocks already registered in the prefix cache (or found there).
    int num_cached_blocks = 0;
  };

  void extend_block_hashes(RequestBlocks& state, const KVRequestView& request,
                           int num_full_blocks) const;

  int block_size_;
  bool enable_caching_;
  BlockPool pool_;
  std::unordered_map<RequestId, RequestBlocks> requests_;
  PrefixCacheStats stats_;
};

}  // namespace locus
