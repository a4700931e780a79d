// The fixed pool of KV blocks: reference counts, the LRU free queue, and the prefix-cache map from
// a full block's hash to the block that holds it. Single-threaded (the engine thread owns it);
// it deals in block ids only and never touches KV memory.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "kv/block_hash.h"
#include "kv/block_hash_table.h"

namespace locus {

using BlockId = int32_t;

// Invariants (checked by check_invariants()):
//  - ref_count(b) >= 0, and ref_count(b) == 0 exactly when b is in the free queue;
//  - a block with a hash is the one the cache map names for that hash.
// A free block keeps its hash and contents ("evictable"): a later request with the same prefix
// can take it back with touch() until get_new_blocks() reuses it for something else.
class BlockPool {
 public:
  BlockPool(int num_blocks, bool enable_caching);

  int num_blocks() const { return num_blocks_; }
  // Blocks nobody references, cached ones included: what get_new_blocks can hand out.
  int num_free_blocks() const { return num_free_; }
  // Fraction of blocks referenced by some request, in [0, 1] (vLLM's kv_cache_usage).
  double usage() const;
  int num_cached_blocks() const { return static_cast<int>(cached_.size()); }
  bool caching_enabled() const { return enable_caching_; }
  // Cached blocks dropped from the map because their block was reused.
  uint64_t num_evictions() const { return num_evictions_; }

  // Appends `n` blocks taken from the head of the free queue (least recently freed first) to
  // `out`, each with ref count 1; a reused cached block loses its hash. Requires
  // n <= num_free_blocks(): running out is a caller bug (it checks before allocating).
  void get_new_blocks(int n, std::vector<BlockId>& out);

  // The block caching `hash`, if any (referenced or evictable).
  std::optional<BlockId> get_cached_block(const BlockHash& hash) const;

  // One more reference to each block; a free (evictable) block leaves the free queue.
  void touch(std::span<const BlockId> blocks);

  // One reference fewer to each block, in order; blocks reaching zero go to the queue's tail in
  // that order, so they are evicted in that order. Freeing an unreferenced block aborts.
  void free_blocks(std::span<const BlockId> blocks);

  // Registers a full, referenced block under `hash`. If another block already caches the same
  // hash (two requests computed the same prefix in one step), the first stays and this one is
  // left uncached: both hold the same contents, and one entry per hash keeps eviction simple.
  void cache_full_block(BlockId block, const BlockHash& hash);

  // Forgets every cached hash. Only when no block is referenced (returns false otherwise),
  // e.g. after weights change (vLLM's reset_prefix_cache).
  bool reset_prefix_cache();

  int ref_count(BlockId block) const { return ref_count_[static_cast<size_t>(block)]; }
  std::optional<BlockHash> block_hash(BlockId block) const;

  // Walks every structure; for tests and debug builds (O(num_blocks)).
  Status check_invariants() const;

 private:
  void queue_remove(BlockId b);
  void queue_push_back(BlockId b);
  BlockId queue_pop_front();
  void evict_hash(BlockId b);

  int num_blocks_;
  bool enable_caching_;
  int num_free_ = 0;
  uint64_t num_evictions_ = 0;
  std::vector<int32_t> ref_count_;
  // Intrusive doubly linked free queue over block ids; index num_blocks_ is the sentinel, so a
  // block can leave the middle of the queue in O(1) when a prefix hit revives it.
  std::vector<BlockId> prev_;
  std::vector<BlockId> next_;
  std::vector<uint8_t> has_hash_;
  std::vector<BlockHash> hash_;
  BlockHashTable cached_;
};

}  // namespace locus
